"""A PostgreSQL server of a test's own, which the test may restart at will.

Restarting the shared test server would break the tests running beside it, so a test that
restarts the database starts its own: ``initdb`` into a fresh folder (as the ``postgres``
user when run as root, as PostgreSQL requires), on a free port, trust auth. It skips fsync
(which only matters if the machine itself crashes) but keeps synchronous commits: an
immediate stop must lose no committed transaction, as a real crash of the server would not.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

BIN_ROOT = Path("/usr/lib/postgresql")
START_TIMEOUT_S = 60


def server_binaries() -> Path | None:
    """Return the newest installed PostgreSQL's ``bin`` folder, if any."""
    found = sorted(BIN_ROOT.glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


class PrivatePostgres:
    """A running PostgreSQL cluster in a temporary folder; stopped and removed on exit."""

    def __init__(self, binaries: Path) -> None:
        self._bin = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="signoff-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "--no-instructions",
        )
        self.start()

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )

    def stop(self) -> None:
        """Stop the server at once, closing every connection (what a crash or failover does)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def log(self) -> str:
        """Return the server's log."""
        path = self.folder / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def close(self) -> None:
        """Stop the server if it runs and remove its folder."""
        subprocess.run(
            self._command("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"),
            capture_output=True,
            check=False,
            timeout=START_TIMEOUT_S,
        )
        shutil.rmtree(self.folder, ignore_errors=True)

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self._bin / program), *args]
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            self._command(program, *args),
            capture_output=True,
            text=True,
            check=False,
            timeout=START_TIMEOUT_S * 2,
        )
        assert done.returncode == 0, f"{program} failed: {done.stdout}{done.stderr}{self.log()}"

    def __enter__(self) -> PrivatePostgres:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
