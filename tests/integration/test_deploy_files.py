"""The container image and the compose file: linted, consistent with the command line, and
the start-up sequence they describe (migrate, serve, the image's own health probe) run here
for real, without Docker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli.main import build_parser
from devkit.sandbox.slack_api import DEFAULT_TOKEN, Workspace, start_slack_api
from tests.integration import REPO_ROOT, bound_port, cli_ok, signoff_command, signoff_env

DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE = REPO_ROOT / "compose.yaml"
HEALTHY_WITHIN_S = 30.0


def instructions(path: Path) -> list[tuple[str, str]]:
    """Return the Dockerfile's instructions as (KEYWORD, arguments), continuations joined."""
    logical = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    found = []
    for line in logical.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def final_stage(path: Path) -> dict[str, str]:
    """Return the last value of each instruction in the image's final stage."""
    stages: list[dict[str, str]] = []
    for keyword, rest in instructions(path):
        if keyword == "FROM":
            stages.append({})
        stages[-1][keyword] = rest
    return stages[-1]


def health_probe(stage: dict[str, str]) -> list[str]:
    """Return the exec-form command of the final stage's HEALTHCHECK."""
    options, _, command = stage["HEALTHCHECK"].partition("CMD ")
    assert "--interval=" in options
    probe = json.loads(command)
    assert isinstance(probe, list)
    return [str(part) for part in probe]


def compose_services() -> dict[str, dict[str, Any]]:
    """Return the compose file's services, YAML anchors and merge keys resolved."""
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    assert isinstance(services, dict)
    return services


def test_the_image_builds_its_wheel_from_every_package_the_project_ships() -> None:
    """Each package ``pyproject.toml`` includes is copied into the build stage: the image
    lacked ``devkit``, so ``signoff --help`` and ``SIGNOFF_DEMO=1`` failed in it with
    ``No module named 'devkit'`` (its entry points were registered all the same)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    included = project["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = {pattern.rstrip("*") for pattern in included}
    every = instructions(DOCKERFILE)
    second = [keyword for keyword, _ in every].index("FROM", 1)
    copied = {rest.split()[0] for keyword, rest in every[:second] if keyword == "COPY"}
    assert shipped <= copied, f"not copied into the build stage: {sorted(shipped - copied)}"


def test_the_dockerfile_passes_hadolint() -> None:
    """hadolint, Dockerfile best practices, finds nothing to report."""
    hadolint = Path(sys.executable).with_name("hadolint")
    result = subprocess.run(
        [str(hadolint), str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_signoff_serve_unprivileged_and_probes_healthz() -> None:
    """The final stage runs ``signoff serve`` as a numeric non-root user, health on /healthz."""
    stage = final_stage(DOCKERFILE)
    assert stage["USER"].isdigit()
    assert int(stage["USER"]) != 0
    assert json.loads(stage["ENTRYPOINT"]) == ["signoff"]
    assert json.loads(stage["CMD"]) == ["serve"]
    assert "/healthz" in " ".join(health_probe(stage))
    assert "SIGNOFF_PORT=8080" in stage["ENV"]
    assert stage["EXPOSE"] == "8080"


def test_every_compose_command_is_one_the_command_line_accepts() -> None:
    """Each Signoff service's command parses; serve and worker wait for the migration."""
    services = compose_services()
    signoff = {name: s for name, s in services.items() if s.get("build") == "."}
    assert sorted(signoff) == ["migrate", "serve-a", "serve-b", "worker"]
    parser = build_parser()
    commands = {name: parser.parse_args(s["command"]).command for name, s in signoff.items()}
    assert commands == {"migrate": "db", "serve-a": "serve", "serve-b": "serve", "worker": "worker"}
    for name in ("serve-a", "serve-b", "worker"):
        assert signoff[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}
        }
    url = signoff["worker"]["environment"]["SIGNOFF_DATABASE_URL"]
    assert url.startswith("postgresql+psycopg://")
    assert "@db:5432/" in url


@pytest.mark.postgres
def test_the_start_up_sequence_of_the_image_runs_and_becomes_healthy(
    pg_url: str, tmp_path: Path
) -> None:
    """``db upgrade`` then compose's ``serve`` command, probed by the image's HEALTHCHECK."""
    services = compose_services()
    slack = start_slack_api(Workspace())
    env = signoff_env(
        pg_url,
        extra={
            "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
            "SLACK_SIGNING_SECRET": "s" * 32,
            "SIGNOFF_APPROVERS": "U_DANA",
            "SIGNOFF_SLACK_API_URL": slack.api_url,
            "SIGNOFF_PORT": "0",
        },
    )
    serve = None
    try:
        cli_ok(env, *services["migrate"]["command"])
        log = (tmp_path / "serve.log").open("w")
        serve = subprocess.Popen(
            [*signoff_command(), *services["serve-a"]["command"]],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started = serve

        def alive() -> None:
            assert started.poll() is None, (tmp_path / "serve.log").read_text()

        port = bound_port(
            tmp_path / "serve.log", "/slack/events", timeout=HEALTHY_WITHIN_S, alive=alive
        )
        probe = health_probe(final_stage(DOCKERFILE))
        assert probe[0] == "python"
        probe[0] = sys.executable
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        while (
            subprocess.run(
                probe,
                env={**os.environ, "SIGNOFF_PORT": str(port)},
                capture_output=True,
                timeout=10,
                check=False,
            ).returncode
            != 0
        ):
            assert serve.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "not healthy in time"
            time.sleep(0.1)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
    finally:
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(timeout=30)
        slack.stop()
