"""README shell blocks marked ``<!-- runs-as-test -->`` run, as written, in a fresh directory.

Each walkthrough runs on the default SQLite file of a temporary directory, with the
``signoff`` next to this Python first on ``PATH``. The engine walkthrough runs in one bash;
the others command by command, so that the placeholders a reader fills in can be too:
``RUN`` is the run the walkthrough last started, and ``…APPROVAL_ID`` the approval pending
when it is first named. A command whose comment says ``refused`` must fail; every other one
must succeed. The demo provider's port 8765 becomes a free port, and the checkout is on
``PYTHONPATH`` (a reader runs these in it).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from tests.integration import REPO_ROOT, wait_until
from tests.readme import Block, marked

PLACEHOLDER = re.compile(r"\b(RUN|[A-Z_]*APPROVAL_ID)\b")
DEMO_PORT = "8765"
TIMEOUT_S = 120


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO_ROOT)  # the checkout, where a reader runs these
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def _walkthrough(needle: str) -> Block:
    (block,) = [b for b in marked("runs-as-test") if needle in b.text]
    return block


def _free_port() -> str:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


class Walkthrough:
    """Runs a README block's commands one by one in ``cwd``, as a reader would type them."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.env = _env()
        self.port = _free_port()
        self.env["SIGNOFF_DEMO_PROVIDER_URL"] = f"http://127.0.0.1:{self.port}"
        self.exports: list[str] = []
        self.bound: dict[str, str] = {}
        self.outputs: list[tuple[str, str]] = []
        self.background: list[subprocess.Popen[bytes]] = []

    def run(self, block: Block) -> None:
        """Run every command of ``block``; fail on the first one that does not do as it says."""
        for line in block.text.replace("\\\n", " ").splitlines():
            if line.strip():
                self._command(line.replace(DEMO_PORT, self.port))

    def output(self, prefix: str) -> str:
        """Return the output of the last command that starts with ``prefix``."""
        return next(out for line, out in reversed(self.outputs) if line.startswith(prefix))

    def _command(self, line: str) -> None:
        command = PLACEHOLDER.sub(lambda found: self._value(found.group(1)), line)
        code = command.split("#", 1)[0].rstrip()
        if code.startswith("export "):
            self.exports.append(code)
        if code.endswith("&"):
            self._start(code.removesuffix("&"))
            return
        done = self._bash(code)
        if "# refused" in line:
            assert done.returncode != 0, f"not refused: {command}\n{done.stdout}"
        else:
            assert done.returncode == 0, f"{command} -> {done.returncode}\n{done.stderr}"
        self.outputs.append((code, done.stdout))
        if re.match(r"signoff (run|start) ", code):
            self.bound["RUN"] = done.stdout.split()[-1]

    def _value(self, placeholder: str) -> str:
        if placeholder not in self.bound:
            assert placeholder != "RUN", "RUN named before a run was started"
            pending = json.loads(self._bash("signoff approvals --pending --json").stdout)
            assert pending, f"no approval pending for {placeholder}"
            self.bound[placeholder] = pending[0]["id"]
        return self.bound[placeholder]

    def _bash(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", "\n".join([*self.exports, code])],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )

    def _start(self, code: str) -> None:
        log = self.cwd / f"background-{len(self.background)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", "\n".join([*self.exports, f"exec {code}"])],
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.background.append(process)
        wait_until(lambda: log.stat().st_size, timeout=30, what=f"{code} to start")

    def stop(self) -> None:
        """End the commands left running in the background."""
        for process in self.background:
            process.terminate()
            process.wait(30)


@contextmanager
def _walking(cwd: Path) -> Iterator[Walkthrough]:
    walk = Walkthrough(cwd)
    try:
        yield walk
    finally:
        walk.stop()


def test_every_walkthrough_has_a_test() -> None:
    """Each block marked to run is one of the walkthroughs this module runs."""
    needles = ("kill -9 %1", "signoff demo provider", "SIGNOFF_WORKFLOWS=examples")
    assert sorted(str(_walkthrough(n)) for n in needles) == sorted(
        str(b) for b in marked("runs-as-test")
    )


def test_the_engine_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The SIGKILL walkthrough, run by bash, kills the worker mid-run and ends with each of
    the six steps done once."""
    block = _walkthrough("kill -9 %1").text
    done = subprocess.run(
        ["bash", "-c", "set -m\n" + block],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^status\s+running$", done.stdout, re.M), "killed while running"
    assert (tmp_path / "steps.txt").read_text().splitlines() == [f"step {i}" for i in range(1, 7)]
    assert done.stdout.endswith("".join(f"step {i}\n" for i in range(1, 7)))


@pytest.mark.timeout(400)
def test_the_demo_agent_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The demo's refund and email: two approvals, one refusal, one charge, an intact audit."""
    with _walking(tmp_path) as walk:
        walk.run(_walkthrough("signoff demo provider"))
        assert re.search(r"^status\s+completed$", walk.output("signoff show"), re.M)
        assert "1 charge(s) created" in walk.output("signoff demo ledger")
        assert "audit log intact" in walk.output("signoff audit verify")
        assert walk.bound["APPROVAL_ID"] != walk.bound["EMAIL_APPROVAL_ID"]


def test_the_workflow_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The approval workflow: started, signalled from another process, refunded, asleep."""
    with _walking(tmp_path) as walk:
        walk.run(_walkthrough("SIGNOFF_WORKFLOWS=examples"))
        shown = walk.output("signoff show")
        assert re.search(r"^status\s+waiting \(until ", shown, re.M), shown
        assert re.search(r"^\s+4\s+step\s+pay_refund\s", shown, re.M), shown
