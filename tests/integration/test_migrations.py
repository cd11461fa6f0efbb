"""The Alembic migrations build exactly the schema of ``store.models``, and step back cleanly."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, column, func, insert, inspect, select, table, text

from agent_runtime import ApprovalStatus, Lease, LeaseLost, StepKind, StepRecord, new_run_id
from agent_runtime.audit import GENESIS, AuditDraft, AuditEntry, chain
from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.audit_report import examine
from store import SqlStore
from store.approval_store import SqlApprovalStore
from store.migrate import alembic_config, downgrade, upgrade
from store.models import approvals, runs, steps
from store.schema import metadata
from store.types import UTCDateTime

MODEL_TABLES = set(metadata.tables)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _differences(engine: Engine) -> list[Any]:
    """Return what autogenerate would change to make the database match the models."""
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff: list[Any] = compare_metadata(context, metadata)
        return diff


def _revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _plain(index: Any) -> dict[str, Any]:
    """A reflected index with its dialect options (a partial index's WHERE) as text."""
    options = {k: str(v) for k, v in (index.get("dialect_options") or {}).items()}
    return {**index, "dialect_options": options}


def _schema(engine: Engine) -> dict[str, Any]:
    """Return the reflected schema: every table's columns, keys and indexes."""
    inspector = inspect(engine)
    return {
        table: {
            "columns": [
                (c["name"], repr(c["type"]), c["nullable"], c.get("default"))
                for c in inspector.get_columns(table)
            ],
            "primary_key": inspector.get_pk_constraint(table),
            "foreign_keys": sorted(inspector.get_foreign_keys(table), key=repr),
            "indexes": sorted((_plain(i) for i in inspector.get_indexes(table)), key=repr),
            "unique": sorted(inspector.get_unique_constraints(table), key=repr),
        }
        for table in sorted(inspector.get_table_names())
    }


def _head(engine: Engine) -> str | None:
    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def test_upgrade_from_empty_matches_the_models(empty_engine: Engine) -> None:
    """Upgrading an empty database to head gives a schema autogenerate finds identical to models."""
    assert inspect(empty_engine).get_table_names() == []
    upgrade(empty_engine)
    assert set(inspect(empty_engine).get_table_names()) == MODEL_TABLES | {"alembic_version"}
    assert _revision(empty_engine) == _head(empty_engine)
    assert _differences(empty_engine) == []


def test_downgrade_one_revision_then_upgrade_restores_the_schema(empty_engine: Engine) -> None:
    """Downgrading one revision and upgrading again works and leaves the very same schema."""
    upgrade(empty_engine)
    head = _head(empty_engine)
    assert head is not None
    at_head = _schema(empty_engine)
    previous = ScriptDirectory.from_config(alembic_config(empty_engine)).get_revision(head)
    assert previous is not None

    downgrade(empty_engine, "-1")
    assert _revision(empty_engine) == previous.down_revision
    assert _schema(empty_engine) != at_head, "the downgrade changed nothing"
    if previous.down_revision is None:
        assert not MODEL_TABLES & set(inspect(empty_engine).get_table_names())

    upgrade(empty_engine)
    assert _revision(empty_engine) == head
    assert _schema(empty_engine) == at_head
    assert _differences(empty_engine) == []


def test_latest_revision_is_alembics_head() -> None:
    """The fast up-to-date check names the same head revision Alembic computes."""
    from alembic.script import ScriptDirectory

    from store.migrate import MIGRATIONS, latest_revision

    assert ScriptDirectory(str(MIGRATIONS)).get_current_head() == latest_revision()


def test_upgrade_gives_pending_approvals_their_next_due_time(empty_engine: Engine) -> None:
    """Approvals pending before 0010 are due at their reminder or deadline; decided ones never."""
    upgrade(empty_engine, "0009")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    run_id = new_run_id()
    asked = {
        "reminded": (t0 + timedelta(minutes=10), "pending"),
        "unreminded": (None, "pending"),
        "decided": (t0 + timedelta(minutes=10), "approved"),
    }
    with empty_engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                id=run_id, workflow="wf", status="waiting", created_at=t0, updated_at=t0, fence=0
            )
        )
        for position, (name, (remind_at, status)) in enumerate(asked.items()):
            conn.execute(
                insert(approvals).values(
                    _old_approval(name, run_id, position, t0)
                    | {"remind_at": remind_at, "status": status}
                )
            )
    upgrade(empty_engine)
    with empty_engine.connect() as conn:
        rows = conn.execute(select(approvals.c.id, approvals.c.next_due_at))
        due = {row.id: row.next_due_at for row in rows}
    assert due == {
        "reminded": t0 + timedelta(minutes=10),
        "unreminded": t0 + timedelta(hours=1),
        "decided": None,
    }


def test_the_single_audit_chain_becomes_shard_0_and_still_verifies(empty_engine: Engine) -> None:
    """A log and an anchor written at 0014 (one chain, entries of runs of any shard) verify
    unchanged as shard 0 after the upgrade; new entries go to their runs' shards."""
    upgrade(empty_engine, "0014")
    keys = AuditKeys((AuditKey("k1", b"k" * 32),))
    old: list[AuditEntry] = []
    for seq, run_id in enumerate(("r1", "x", "b"), start=1):
        draft = AuditDraft(at=T0, approval_id="ap", run_id=run_id, action="approve", actor=None)
        old.append(chain(draft, seq, old[-1].hash if old else GENESIS, keys))
    line = json.dumps(  # an anchor line as 0014's `signoff audit anchor` wrote it
        {"at": T0.isoformat(), "hash": old[-1].hash, "kid": "k1", "mac": old[-1].mac, "seq": 3}
    )
    names = ("seq", "approval_id", "run_id", "action", "prev_hash", "hash", "kid", "mac")
    old_log = table("audit_log", column("at", UTCDateTime), *(column(n) for n in names))
    with empty_engine.begin() as conn:
        for e in old:
            values = {name: getattr(e, name) for name in names}
            conn.execute(insert(old_log).values(values | {"at": e.at}))
        conn.execute(text("UPDATE audit_head SET seq = 3, hash = :hash"), {"hash": old[-1].hash})
    upgrade(empty_engine)
    store = SqlApprovalStore(empty_engine, keys)
    entries, heads = store.audit_log()
    assert [(e.shard, e.seq, e.hash) for e in entries] == [(0, e.seq, e.hash) for e in old]
    assert examine(entries, heads, keys=keys, anchor_lines=[line]).ok

    added = [
        store.append_audit(dataclasses.replace(_draft(old[0]), run_id=r)) for r in ("run", "r1")
    ]
    assert [(e.shard, e.seq) for e in added] == [(0, 4), (1, 1)]
    report = examine(*store.audit_log(), keys=keys, anchor_lines=[line])
    assert (report.ok, report.entries) == (True, 5)


def _draft(entry: AuditEntry) -> AuditDraft:
    return AuditDraft(
        at=entry.at, approval_id=entry.approval_id, run_id=entry.run_id, action=entry.action
    )


def _old_approval(name: str, run_id: str, position: int, t0: datetime) -> dict[str, Any]:
    """An approval row as revision 0009 stores it."""
    return {
        "id": name,
        "run_id": run_id,
        "position": position,
        "kind": "tool_call",
        "tool": "refund",
        "args": {},
        "args_hash": "0" * 64,
        "fingerprint": "0" * 64,
        "policy": {},
        "requester": {"user_id": "U_REQ"},
        "requested_at": t0,
        "deadline": t0 + timedelta(hours=1),
        "reason_asked": "",
        "votes": [],
        "escalated": False,
        "version": 0,
    }


def test_approvals_from_before_previews_read_back_without_one(empty_engine: Engine) -> None:
    """An approval stored before 0017 reads back with no preview and no preview digest, which
    the executor takes as "asked without a preview": it runs unchecked."""
    upgrade(empty_engine, "0016")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    run_id = new_run_id()
    with empty_engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                id=run_id, workflow="wf", status="waiting", created_at=t0, updated_at=t0, fence=0
            )
        )
        conn.execute(
            insert(approvals).values(_old_approval("old", run_id, 0, t0) | {"status": "approved"})
        )
    upgrade(empty_engine)
    found = SqlApprovalStore(empty_engine).get_approval("old")
    assert (found.status, found.preview, found.preview_digest) == (
        ApprovalStatus.APPROVED,
        None,
        None,
    )


def test_journals_written_before_0019_are_kept_without_their_foreign_key(
    empty_engine: Engine,
) -> None:
    """A journal written at 0018 reads back the same after 0019 drops its foreign key, and
    an append for a run that does not exist still writes nothing."""
    upgrade(empty_engine, "0018")
    run_id = new_run_id()
    written = [
        {"run_id": run_id, "position": p, "kind": "step", "name": f"s{p}", "input_hash": "h"}
        | {"output": {"p": p, "text": "é"}, "attempts": 1, "started_at": T0, "finished_at": T0}
        for p in range(3)
    ]
    with empty_engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                id=run_id, workflow="wf", status="running", created_at=T0, updated_at=T0, fence=1
            )
        )
        conn.execute(insert(steps), written)
    upgrade(empty_engine)
    assert inspect(empty_engine).get_foreign_keys("steps") == []
    store = SqlStore(empty_engine)
    assert [(s.position, s.output) for s in store.load_journal(run_id)] == [
        (p, {"p": p, "text": "é"}) for p in range(3)
    ]
    store.append_step(Lease(run_id, "w", 1), _entry(3))
    with pytest.raises(LeaseLost):
        store.append_step(Lease(new_run_id(), "w", 1), _entry(0))
    with empty_engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(steps)).scalar_one() == 4


def _entry(position: int) -> StepRecord:
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name=f"s{position}",
        input_hash="h",
        output=None,
        started_at=T0,
        finished_at=T0,
    )
