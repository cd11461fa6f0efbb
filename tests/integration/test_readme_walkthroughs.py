"""README shell blocks marked ``<!-- runs-as-test -->`` run, as written, in a fresh directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.integration import REPO_ROOT

MARKED = re.compile(r"<!-- runs-as-test -->\n```sh\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return MARKED.findall((REPO_ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_engine_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """The SIGKILL walkthrough, run by bash, ends with each of the six steps done once."""
    (block,) = _blocks()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-c", "set -m\n" + block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "steps.txt").read_text().splitlines() == [f"step {i}" for i in range(1, 7)]
    assert done.stdout.endswith("".join(f"step {i}\n" for i in range(1, 7)))
