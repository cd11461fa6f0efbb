"""A pooler lending server connections per transaction, found when the database URL does not
say so: ``signoff worker`` and ``signoff serve`` refuse to start, ``signoff doctor`` names it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from store.engine import POOLING, build_engine
from store.errors import STATEMENT_POOLING_HINT
from store.pooler import UNDECLARED, lends_per_transaction
from tests.integration import run_cli, signoff_env
from tests.integration.pgbouncer import PgBouncer, pgbouncer_binary, reached

pytestmark = pytest.mark.postgres


SERVE = {"SIGNOFF_PORT": "0", "SLACK_SIGNING_SECRET": "s" * 32, "SLACK_BOT_TOKEN": "xoxb-0"}
"""What ``signoff serve`` needs to get as far as its database (the port never bound)."""


def undeclared(url: str) -> str:
    """``url`` without its ``pooling`` parameter."""
    return make_url(url).difference_update_query([POOLING]).render_as_string(hide_password=False)


@pytest.mark.parametrize("how", ["direct", "session-pooled", "transaction-pooled"])
def test_only_a_pooler_lending_by_transaction_is_seen_lending_by_transaction(
    how: str, pg_url: str
) -> None:
    """Two connections open at once read one server pid through PgBouncer in transaction
    mode, never when connected directly or through session pooling."""
    with reached(how, pg_url) as url:
        engine = build_engine(undeclared(url))
        try:
            assert lends_per_transaction(engine) is (how == "transaction-pooled")
        finally:
            engine.dispose()


def test_a_transaction_pooler_lending_its_connections_in_turn_is_seen_too(pg_url: str) -> None:
    """PgBouncer in transaction mode with ``server_round_robin``, several server connections
    idle, is seen (a connection reads another pid at its next transaction), probe after
    probe on one engine (nothing prepared that the pooler could lose)."""
    binary = pgbouncer_binary()
    assert binary is not None, "pgbouncer missing: apt-get install -y pgbouncer"
    bouncer = PgBouncer(binary, pg_url, pool_mode="transaction", round_robin=True)
    try:
        url = bouncer.url(pg_url)
        warm_up(url, connections=4)
        engine = build_engine(url)
        try:
            assert [lends_per_transaction(engine) for _ in range(3)] == [True] * 3
        finally:
            engine.dispose()
    finally:
        bouncer.close()


def warm_up(url: str, connections: int) -> None:
    """Have the pooler at ``url`` open ``connections`` server connections (each client holds
    one while the others start)."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    together = threading.Barrier(connections, timeout=30)

    def hold() -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT 1")
            together.wait()  # every client holds a server connection in its transaction

    threads = [threading.Thread(target=hold) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def test_processes_behind_an_undeclared_transaction_pooler_refuse_to_start(
    pg_url: str, tmp_path: Path
) -> None:
    """Behind PgBouncer in transaction mode without ``pooling=transaction``, ``signoff
    worker`` and ``signoff serve`` exit at once with the fix, and ``signoff doctor`` fails
    its pooling check with it; with the parameter, doctor passes it."""
    with reached("transaction-pooled", pg_url) as declared:
        env = signoff_env(undeclared(declared), extra=SERVE)
        for command in ("worker", "serve"):
            done = run_cli(env, command, cwd=tmp_path)
            assert done.returncode == 2, done.stderr
            assert done.stderr.strip().splitlines()[-1] == f"signoff: error: {UNDECLARED}"
        assert _pooling_check(env) == {
            "check": "connection pooling",
            "ok": False,
            "detail": UNDECLARED,
        }
        assert _pooling_check(signoff_env(declared))["ok"]


def test_a_worker_behind_a_statement_pooler_stops_at_once_saying_why(
    pg_url: str, tmp_path: Path
) -> None:
    """PgBouncer in statement mode allows no transaction: ``signoff worker`` exits 2 at once
    with what to pool by instead (it kept trying, as if the database were down)."""
    binary = pgbouncer_binary()
    assert binary is not None, "pgbouncer missing: apt-get install -y pgbouncer"
    bouncer = PgBouncer(binary, pg_url, pool_mode="statement")
    try:
        done = run_cli(signoff_env(bouncer.url(pg_url)), "worker", cwd=tmp_path)
    finally:
        bouncer.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"signoff: error: {STATEMENT_POOLING_HINT}"


def test_doctor_passes_the_pooling_check_of_a_direct_connection(pg_url: str) -> None:
    """Connected directly, the pooling check passes and says no such pooler was seen."""
    assert _pooling_check(signoff_env(pg_url)) == {
        "check": "connection pooling",
        "ok": True,
        "detail": "no pooler seen lending by transaction",
    }


def _pooling_check(env: dict[str, str]) -> dict[str, object]:
    """The ``connection pooling`` check of ``signoff doctor --json`` in ``env``."""
    checks = json.loads(run_cli(env, "doctor", "--json").stdout)
    [check] = [c for c in checks if c["check"] == "connection pooling"]
    return dict(check)
