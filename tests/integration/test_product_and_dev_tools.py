"""The product apart from its dev tools: production loads only what the operator names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.integration import REPO_ROOT, run_cli, signoff_env

PRODUCT = ("agent_runtime", "store", "bot")
STORE_USERS = ("bot", "devkit")
ENGINE_MUST_NOT_IMPORT = (
    "store",
    "bot",
    "devkit",
    "sqlalchemy",
    "psycopg",
    "slack_sdk",
    "slack_bolt",
)
GATED_WITHOUT_APPROVERS = "tests.integration.test_product_and_dev_tools:unapprovable_agent"


def unapprovable_agent() -> object:
    """An agent whose gated tool asks a group nobody configured."""
    from agent_runtime import Agent, ApprovalPolicy, Tools, tool
    from agent_runtime.models import ScriptedModel
    from agent_runtime.models.scripted import text_reply

    def pay(amount_cents: int) -> str:
        """Pay."""
        return "paid"

    gated = tool(side_effect=True, approval=ApprovalPolicy(groups=("finance",)), name="pay")(pay)
    model = ScriptedModel(lambda _: text_reply("done"))
    return Agent(name="payer", model=model, system_prompt="pay", tools=Tools(gated))


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _store_submodules() -> set[str]:
    package = REPO_ROOT / "store"
    return {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }


def _store_submodules_imported(path: Path, submodules: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("store.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("store."):
                found.append(node.module)
            elif node.module == "store":
                found += [f"store.{a.name}" for a in node.names if a.name in submodules]
    return found


def test_the_app_and_the_dev_tools_import_only_the_store_package() -> None:
    """No module under bot/ or devkit/ imports a store submodule, only `store` itself."""
    submodules = _store_submodules()
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for package in STORE_USERS
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        for name in _store_submodules_imported(path, submodules)
    ]
    assert offenders == []


def test_the_engine_imports_neither_the_store_nor_slack_nor_a_driver() -> None:
    """Nothing under agent_runtime/ imports store, bot, devkit, SQLAlchemy, psycopg or Slack."""
    offenders = [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path in sorted((REPO_ROOT / "agent_runtime").rglob("*.py"))
        for name in sorted(_imported_modules(path))
        if name.split(".")[0] in ENGINE_MUST_NOT_IMPORT
    ]
    assert offenders == []


def test_no_product_module_imports_the_dev_tools() -> None:
    """Nothing under agent_runtime/, store/ or bot/ has an import of devkit."""
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for package in PRODUCT
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        if any(name.split(".")[0] == "devkit" for name in _imported_modules(path))
    ]
    assert offenders == []


def test_serving_production_loads_no_dev_tool_module(tmp_path: Path) -> None:
    """Parsing `signoff serve` and wiring the services without SIGNOFF_DEMO import no devkit."""
    script = (
        "import sys\n"
        "from bot.app.settings import Settings\n"
        "from bot.cli.main import build_parser\n"
        "from bot.app.wiring import build_services\n"
        "import bot.app.server\n"
        "build_parser(Settings(), ['serve']).parse_args(['serve'])\n"
        f"services = build_services(Settings(database_url='sqlite:///{tmp_path}/s.db'))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'devkit'))\n"
        "print(sorted(agent.name for agent in services.agents))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "[]"]


def test_the_demo_exists_only_with_signoff_demo(tmp_path: Path) -> None:
    """Without SIGNOFF_DEMO the demo workflows and agent are unknown; with it they run."""
    url = f"sqlite:///{tmp_path / 'signoff.db'}"
    production = signoff_env(url, extra={"SIGNOFF_DEMO": "0"})
    refused = run_cli(production, "start", "demo.trivial", "--input", '{"n": 1}')
    assert refused.returncode == 2
    assert "unknown workflow 'demo.trivial'" in refused.stderr
    agent = run_cli(production, "run", "refund order 1043")
    assert agent.returncode == 2
    assert "no agent is configured" in agent.stderr
    demo = run_cli(signoff_env(url), "start", "demo.trivial", "--input", '{"n": 1}')
    assert demo.returncode == 0, demo.stderr


def test_an_agent_nobody_may_approve_is_a_startup_error(tmp_path: Path) -> None:
    """A gated tool whose approvers resolve to nobody stops the worker with a clear error
    naming the group the agent lacks, and no advice about the environment (which names the
    demo agent's approvers, not this one's)."""
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}",
        extra={"SIGNOFF_DEMO": "0", "SIGNOFF_AGENT": GATED_WITHOUT_APPROVERS},
    )
    done = run_cli(env, "worker", "--until-idle")
    assert done.returncode == 2
    assert done.stderr.startswith("signoff: error: agent 'payer' has too few approvers")
    assert "pay needs 1, has 0 (no group 'finance')" in done.stderr
    assert "approver_groups (its groups: none)" in done.stderr
    assert "SIGNOFF_APPROVERS" not in done.stderr


def test_the_dev_commands_come_from_the_dev_tools_plugin() -> None:
    """`signoff --help` lists dev and demo, which the dev tools add through an entry point."""
    env = signoff_env("sqlite:///unused.db")
    listed = run_cli(env, "--help")
    assert listed.returncode == 0
    assert "dev" in listed.stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert run_cli(env, "demo", "--help").returncode == 0
