"""``signoff`` in the test's own process: the very ``bot.cli.main.main`` the script calls, with
a test's ``SIGNOFF_*`` environment and its output captured.

For the cases where the process boundary is not what a test proves: the same command's exit
status and output are proven once through a real ``signoff`` process (``run_cli``), and its
other cases run here, without paying an interpreter start and the imports each time.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Protocol

import pytest

from bot.cli.main import main


class Cli(Protocol):
    """Runs ``signoff <args>`` with an environment: ``run_cli``, or an ``InProcessCli``."""

    def __call__(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``signoff <args>`` to completion; return its exit status and output."""


@dataclass(frozen=True)
class InProcessCli:
    """``signoff <args>`` through ``bot.cli.main.main`` in this process."""

    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def __call__(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``signoff <args>`` with ``env``'s ``SIGNOFF_*`` variables (and no others);
        return its exit status, stdout and stderr as ``run_cli`` does."""
        self.capsys.readouterr()
        with self.monkeypatch.context() as patch:
            for name in [n for n in os.environ if n.startswith("SIGNOFF_")]:
                patch.delenv(name)
            for name, value in env.items():
                if name.startswith("SIGNOFF_"):
                    patch.setenv(name, value)
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors
                code = exit_.code if isinstance(exit_.code, int) else 1
            out, err = self.capsys.readouterr()
        return subprocess.CompletedProcess(["signoff", *args], code, out, err)

    def ok(self, env: dict[str, str], *args: str) -> str:
        """Run ``signoff <args>``, require exit status 0 and return its stdout."""
        done = self(env, *args)
        assert done.returncode == 0, f"signoff {' '.join(args)} -> {done.returncode}\n{done.stderr}"
        return done.stdout
