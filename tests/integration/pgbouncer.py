"""A PgBouncer of a test's own in front of the shared test server, pooling by session or by
transaction.

It listens on a free port of the loopback, lets every database through to the server the
tests use, with trust auth, and keeps PgBouncer's defaults otherwise (in session mode, a
server connection given to another client is reset with ``DISCARD ALL`` first). PgBouncer
refuses to run as root, so as root it runs as the ``postgres`` user, as the server does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.integration import wait_until
from tests.integration.serve_cluster import free_port

START_TIMEOUT_S = 30.0
TRIES = 3
"""Ports to try: another process may take the free port before PgBouncer binds it."""


def pgbouncer_binary() -> str | None:
    """PgBouncer's program, if it is installed."""
    return shutil.which("pgbouncer", path=f"{os.environ.get('PATH', '')}:/usr/sbin")


class PgBouncer:
    """A running PgBouncer passing every database through to ``server_url``'s server; its
    ``url(database_url)`` is the URL of the same database reached through it."""

    def __init__(
        self,
        binary: str,
        server_url: str,
        pool_mode: str = "session",
        *,
        round_robin: bool = False,
    ) -> None:
        self._binary = binary
        self._server = make_url(server_url)
        self._pool_mode = pool_mode
        self._round_robin = round_robin
        self.folder = Path(tempfile.mkdtemp(prefix="signoff-pgbouncer-"))
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        for _ in range(TRIES):
            self.port = free_port()
            if self._start():
                return
        raise AssertionError(f"PgBouncer did not start: {self.log()}")

    def url(self, database_url: str) -> str:
        """``database_url``'s database, reached through this PgBouncer."""
        return (
            make_url(database_url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )

    def _start(self) -> bool:
        """Start on ``self.port``; True once it accepts connections, False if it exited."""
        user = self._server.username or "postgres"
        (self.folder / "users.txt").write_text(f'"{user}" ""\n')
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={self._server.host or '127.0.0.1'} port={self._server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            f"pool_mode = {self._pool_mode}\nmax_client_conn = 500\ndefault_pool_size = 100\n"
            f"server_round_robin = {int(self._round_robin)}\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        command = [self._binary, str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        dsn = f"host=127.0.0.1 port={self.port} user={user} dbname=postgres connect_timeout=5"

        def ready() -> bool | None:
            assert self._process is not None
            if self._process.poll() is not None:
                return None
            try:
                psycopg.connect(dsn).close()
            except psycopg.OperationalError:
                return False
            return True

        wait_until(
            lambda: ready() is not False,
            timeout=START_TIMEOUT_S,
            what="PgBouncer to accept connections",
        )
        return ready() is True

    def served(self, database_url: str) -> bool:
        """Whether a client logged in to ``database_url``'s database through this PgBouncer."""
        path = self.folder / "pgbouncer.log"
        database = make_url(database_url).database
        return path.exists() and f"login attempt: db={database} " in path.read_text("utf-8")

    def log(self) -> str:
        """The end of PgBouncer's log."""
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def close(self) -> None:
        """Stop PgBouncer (closing every connection through it) and remove its folder."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def reached(how: str, pg_url: str) -> Iterator[str]:
    """``pg_url``, reached ``how``: ``direct``, or ``MODE-pooled`` through a PgBouncer of
    the test's own in that mode (its URL saying ``pooling=transaction`` for that mode);
    then check the PgBouncer was used."""
    if how == "direct":
        yield pg_url
        return
    binary = pgbouncer_binary()
    if binary is None:
        pytest.fail("pgbouncer missing: apt-get install -y pgbouncer")
    mode = how.removesuffix("-pooled")
    bouncer = PgBouncer(binary, pg_url, pool_mode=mode)
    try:
        url = bouncer.url(pg_url)
        yield url if mode == "session" else f"{url}?pooling={mode}"
        assert bouncer.served(pg_url), "nothing reached the database through PgBouncer"
    finally:
        bouncer.close()
