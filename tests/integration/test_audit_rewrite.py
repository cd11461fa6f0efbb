"""The audit log against someone who can write to the database and recompute the chain.

Entries are appended through the real wiring (so they are signed with the keys in the
settings); the attacker rewrites them with SQL UPDATEs through SQLAlchemy, recomputing
every hash and the head with the chain function, but without the key, on PostgreSQL.
``signoff audit verify`` and ``anchor`` run as real subprocesses where a test proves what the
command prints and exits with (a rewrite caught, the secret never printed, one anchor file
written), and through the same entry point in this process elsewhere.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, insert, select, update

from agent_runtime.audit import AuditDraft, chain, genesis
from agent_runtime.audit_report import REWRITTEN
from agent_runtime.exceptions import InvalidConfiguration
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from store import SqlStore
from store.models import audit_head, audit_log
from tests.integration import lines, run_cli, signoff_command, signoff_env, wait_until
from tests.integration.in_process import Cli, InProcessCli

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEY = "k1:0f1e2d3c4b5a69788796a5b4c3d2e1f0"
ACTIONS = ["requested", "unauthorized", "approve", "requested", "reject"]
SHARD = "shard 1"
"""Where run r1's entries are."""
MISSING = "is missing from the log (deleted, or the log truncated)"


def env_with(pg_url: str, **extra: str) -> dict[str, str]:
    """The environment of a ``signoff`` process on the test database."""
    return signoff_env(pg_url, extra=extra)


@contextmanager
def wired(pg_url: str, keys: str) -> Iterator[Services]:
    """Services wired from settings whose ``SIGNOFF_AUDIT_KEYS`` is ``keys``."""
    built = build_services(
        Settings.from_env(env_with(pg_url, SIGNOFF_AUDIT_KEYS=keys)), migrate=False
    )
    try:
        yield built
    finally:
        built.store.engine.dispose()


@pytest.fixture
def services(pg_store: SqlStore, pg_url: str) -> Iterator[Services]:
    """Services on the emptied test database that sign with ``KEY``."""
    with wired(pg_url, KEY) as built:
        yield built


def write_log(services: Services, count: int = len(ACTIONS)) -> None:
    """Append ``count`` entries, U_DANA approving entry 3, through the approvals store."""
    for seq, action in enumerate(ACTIONS[:count], start=1):
        who = "U_DANA" if action in ("approve", "reject") else "U_REQUESTER"
        services.approvals.store.append_audit(
            AuditDraft(
                at=T0 + timedelta(minutes=seq),
                approval_id=f"ap{seq // 4}",
                run_id="r1",
                action=action,
                actor={"user_id": who},
                detail={"by": who},
            )
        )


def rechain(engine: Engine) -> None:
    """Recompute every entry's hash of r1's chain from its stored content, in order, and the
    head: what anyone with the chain function and write access can do (the MACs stay as
    they are)."""
    with engine.begin() as conn:
        prev_hash, last = genesis(1), 0
        for row in conn.execute(select(audit_log).order_by(audit_log.c.seq)).all():
            draft = AuditDraft(
                at=row.at,
                approval_id=row.approval_id,
                run_id=row.run_id,
                action=row.action,
                actor=row.actor,
                detail=row.detail,
            )
            entry = chain(draft, row.seq, prev_hash)
            conn.execute(
                update(audit_log)
                .where(audit_log.c.seq == row.seq)
                .values(prev_hash=entry.prev_hash, hash=entry.hash)
            )
            prev_hash, last = entry.hash, row.seq
        conn.execute(
            update(audit_head).where(audit_head.c.shard == 1).values(seq=last, hash=prev_hash)
        )


def rewrite(engine: Engine, seq: int, **values: Any) -> None:
    """Change entry ``seq`` in SQL, then recompute the chain."""
    with engine.begin() as conn:
        conn.execute(update(audit_log).where(audit_log.c.seq == seq).values(**values))
    rechain(engine)


def renumber(engine: Engine, seqs: list[int], by: int) -> None:
    """Move entries ``seqs`` (in that order) ``by`` places."""
    with engine.begin() as conn:
        for seq in seqs:
            conn.execute(update(audit_log).where(audit_log.c.seq == seq).values(seq=seq + by))


def verify(cli: Cli, env: dict[str, str], *flags: str) -> tuple[int, dict[str, Any]]:
    """Run ``signoff audit verify --json`` with ``cli``; return its exit status and report."""
    done = cli(env, "audit", "verify", "--json", *flags)
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_rewritten_and_rechained_approver_is_caught_with_the_key(
    services: Services, pg_url: str
) -> None:
    """U_DANA rewritten to U_MALLORY with every hash recomputed: the verify process with the
    key exits 1."""
    write_log(services)
    env = env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)
    assert verify(run_cli, env)[0] == 0

    rewrite(services.store.engine, 3, actor={"user_id": "U_MALLORY"}, detail={"by": "U_MALLORY"})

    code, report = verify(run_cli, env)
    assert code == 1
    assert report["ok"] is False
    assert report["problems"] == [f"{SHARD}: entry {seq}: {REWRITTEN}" for seq in (3, 4, 5)]


def anchor(cli: Cli, env: dict[str, str], path: Path) -> dict[str, Any]:
    """Run ``signoff audit anchor --file PATH --json`` with ``cli``; return what it anchored."""
    done = cli(env, "audit", "anchor", "--file", str(path), "--json")
    assert done.returncode == 0, done.stderr
    written: dict[str, Any] = json.loads(done.stdout)
    return written


def test_without_the_key_verify_says_a_rewrite_is_undetectable(
    services: Services, pg_url: str, cli_here: InProcessCli
) -> None:
    """Without keys the rewrite passes the chain check, and verify says MACs were not checked."""
    write_log(services)
    rewrite(services.store.engine, 3, actor={"user_id": "U_MALLORY"})
    env = env_with(pg_url)

    code, report = verify(cli_here, env)
    human = cli_here(env, "audit", "verify").stdout

    assert (code, report["ok"], report["macs_verified"]) == (0, True, False)
    assert "MACs not verified (no SIGNOFF_AUDIT_KEYS)" in human
    assert "recompute the chain undetectably" in human


def test_anchors_catch_a_rewrite_and_a_truncation_without_the_key(
    services: Services, pg_url: str, tmp_path: Path, cli_here: InProcessCli
) -> None:
    """An anchor taken before the rewrite (or truncation) by the anchor process makes verify
    exit 1 with no key."""
    write_log(services)
    anchors = tmp_path / "anchors.jsonl"
    written = anchor(run_cli, env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY), anchors)
    assert [(h["shard"], h["seq"], h["kid"]) for h in written["heads"]] == [(1, 5, "k1")]
    env = env_with(pg_url)
    assert verify(cli_here, env, "--anchors", str(anchors))[0] == 0

    rewrite(services.store.engine, 3, actor={"user_id": "U_MALLORY"})
    code, report = verify(cli_here, env, "--anchors", str(anchors))
    assert (code, report["anchors"]) == (1, 1)
    assert report["problems"] == [
        f"{SHARD}: anchor line 1: entry 5 no longer has the anchored hash (the log was rewritten)"
    ]

    with services.store.engine.begin() as conn:
        conn.execute(delete(audit_log).where(audit_log.c.seq >= 4))
    rechain(services.store.engine)
    code, report = verify(cli_here, env, "--anchors", str(anchors))
    assert (code, report["problems"]) == (
        1,
        [f"{SHARD}: anchor line 1: entry 5 {MISSING}"],
    )


def test_stripping_every_mac_is_caught_by_the_anchors(
    services: Services, pg_url: str, tmp_path: Path, cli_here: InProcessCli
) -> None:
    """MACs set to NULL everywhere look like a log from before signing, except to anchors."""
    write_log(services)
    anchors = tmp_path / "anchors.jsonl"
    anchor(cli_here, env_with(pg_url), anchors)
    with services.store.engine.begin() as conn:
        conn.execute(update(audit_log).values(kid=None, mac=None))
    env = env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)

    assert verify(cli_here, env)[1]["unsigned"] == 5, "without anchors: indistinguishable"
    code, report = verify(cli_here, env, "--anchors", str(anchors))

    assert (code, report["chains"][1]["signed_from"]) == (1, 5)
    assert report["problems"] == [
        f"{SHARD}: entry 5: unsigned, though signing began at entry 5",
        f"{SHARD}: anchor line 1: entry 5 no longer has the anchored MAC",
    ]


def test_rotated_keys_verify_old_entries_and_a_removed_key_is_unknown(
    services: Services, pg_url: str, cli_here: InProcessCli
) -> None:
    """Entries signed with k1 verify while k1 is listed second; with k1 removed, they are
    reported as signed with an unknown key id."""
    write_log(services, 2)
    rotated = f"k2:{'ab' * 16},{KEY}"
    with wired(pg_url, rotated) as later:
        write_log(later, 2)
    kids = [e.kid for e in services.approvals.store.audit_log()[0]]
    assert kids == ["k1", "k1", "k2", "k2"]

    assert verify(cli_here, env_with(pg_url, SIGNOFF_AUDIT_KEYS=rotated))[0] == 0
    code, report = verify(cli_here, env_with(pg_url, SIGNOFF_AUDIT_KEYS=f"k2:{'ab' * 16}"))
    assert (code, report["problems"]) == (
        1,
        [f"{SHARD}: entry {seq}: signed with unknown key id 'k1'" for seq in (1, 2)],
    )


def test_deleted_inserted_and_reordered_entries_are_caught(
    services: Services, pg_url: str, cli_here: InProcessCli
) -> None:
    """Deleting, inserting or swapping entries, renumbered and re-chained: verify exits 1."""
    write_log(services)
    engine, env = services.store.engine, env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)

    with engine.begin() as conn:  # U_DANA's approval deleted, later entries moved up
        conn.execute(delete(audit_log).where(audit_log.c.seq == 3))
    renumber(engine, [4, 5], -1)
    rechain(engine)
    code, report = verify(cli_here, env)
    assert (code, report["problems"]) == (
        1,
        [f"{SHARD}: entry {seq}: {REWRITTEN}" for seq in (3, 4)],
    )

    renumber(engine, [4, 3], +1)  # a forged approval inserted at 3
    with engine.begin() as conn:
        row = dict(conn.execute(select(audit_log).where(audit_log.c.seq == 2)).one()._mapping)
        conn.execute(
            insert(audit_log).values(
                {**row, "seq": 3, "action": "approve", "kid": None, "mac": None}
            )
        )
    rechain(engine)
    code, report = verify(cli_here, env)
    assert (code, report["problems"]) == (
        1,
        [
            f"{SHARD}: entry 3: unsigned, though signing began at entry 1",
            *(f"{SHARD}: entry {seq}: {REWRITTEN}" for seq in (4, 5)),
        ],
    )

    with engine.begin() as conn:  # entries 1 and 2 swapped, MACs and all
        conn.execute(update(audit_log).where(audit_log.c.seq == 1).values(seq=99))
    renumber(engine, [2], -1)
    renumber(engine, [99], -97)
    rechain(engine)
    code, report = verify(cli_here, env)
    assert code == 1
    assert report["problems"][:2] == [f"{SHARD}: entry {seq}: {REWRITTEN}" for seq in (1, 2)]


def test_a_mac_copied_from_another_entry_is_caught(
    services: Services, pg_url: str, cli_here: InProcessCli
) -> None:
    """Entry 2's key id and MAC copied onto entry 3: the MAC does not verify for entry 3."""
    write_log(services)
    with services.store.engine.begin() as conn:
        second = conn.execute(select(audit_log).where(audit_log.c.seq == 2)).one()
        conn.execute(
            update(audit_log).where(audit_log.c.seq == 3).values(kid=second.kid, mac=second.mac)
        )

    code, report = verify(cli_here, env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY))

    assert (code, report["problems"]) == (1, [f"{SHARD}: entry 3: {REWRITTEN}"])


def test_the_secret_is_neither_stored_nor_printed(
    services: Services, pg_url: str, tmp_path: Path
) -> None:
    """The key's secret appears in no database row, no anchor and no verify process's output."""
    write_log(services)
    anchors = tmp_path / "anchors.jsonl"
    env = env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)
    anchor(run_cli, env, anchors)
    rewrite(services.store.engine, 3, actor={"user_id": "U_MALLORY"})
    secret = KEY.partition(":")[2]

    outputs = [
        run_cli(env, "audit", "verify", *flags, "--anchors", str(anchors))
        for flags in ((), ("--json",))
    ]
    with services.store.engine.connect() as conn:
        rows = [
            str(row) for table in (audit_log, audit_head) for row in conn.execute(select(table))
        ]

    assert all(
        secret not in text
        for text in (
            *rows,
            anchors.read_text(encoding="utf-8"),
            *(o.stdout + o.stderr for o in outputs),
        )
    )
    assert [o.returncode for o in outputs] == [1, 1]


@contextmanager
def scheduler_only(env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``signoff serve --no-http --no-worker`` (its scheduler alone), SIGKILLed on exit."""
    with log.open("w", encoding="utf-8") as handle:
        process = subprocess.Popen(
            [*signoff_command(), "serve", "--no-http", "--no-worker"],
            env=env,
            cwd=log.parent,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process
        finally:
            process.kill()
            process.wait(timeout=30)


def anchored_seqs(path: Path) -> list[int]:
    """How many entries each anchor line of ``path`` anchored, in file order."""
    return [sum(h["seq"] for h in json.loads(line)["heads"]) for line in lines(path)]


def test_serve_anchors_the_head_whenever_it_changed(
    services: Services, pg_url: str, tmp_path: Path, cli_here: InProcessCli
) -> None:
    """`signoff serve` with an anchor file appends the new head after each change, only then."""
    write_log(services, 3)
    anchors = tmp_path / "anchors.jsonl"
    env = env_with(
        pg_url,
        SIGNOFF_AUDIT_KEYS=KEY,
        SIGNOFF_AUDIT_ANCHOR_FILE=str(anchors),
        SIGNOFF_AUDIT_ANCHOR_INTERVAL_SECONDS="0.1",
        SIGNOFF_SLACK_API_URL="http://127.0.0.1:9/api/",
    )

    with scheduler_only(env, tmp_path / "serve.log") as process:

        def anchored(seq: int) -> bool:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            return seq in anchored_seqs(anchors)

        wait_until(lambda: anchored(3), timeout=30, what="entry 3 to be anchored")
        write_log(services, 2)
        wait_until(lambda: anchored(5), timeout=30, what="entry 5 to be anchored")

    seqs = anchored_seqs(anchors)
    assert (seqs[0], seqs[-1], seqs == sorted(set(seqs))) == (3, 5, True), seqs
    assert verify(cli_here, env_with(pg_url), "--anchors", str(anchors))[0] == 0


def test_a_process_without_the_keys_cannot_append_after_signed_entries(
    services: Services, pg_url: str, cli_here: InProcessCli
) -> None:
    """A decision from a shell without ``SIGNOFF_AUDIT_KEYS`` is refused, nothing written,
    once the chain is signed: its unsigned entry made ``audit verify`` fail for good, as
    tampering does. A log nobody signs takes entries without keys as before."""
    draft = AuditDraft(at=T0, approval_id="ap9", run_id="r1", action="approve", actor={}, detail={})
    with wired(pg_url, "") as keyless:
        keyless.approvals.store.append_audit(draft)  # nothing signed yet: taken
        write_log(services, 2)  # signed from here on
        with pytest.raises(InvalidConfiguration, match="the audit log is signed: set SIGNOFF"):
            keyless.approvals.store.append_audit(draft)
    code, report = verify(cli_here, env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY))
    assert code == 0, report
    assert report["entries"] == 3
