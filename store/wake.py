"""Delivering an event to a run inside a caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, tuple_, update

from agent_runtime.exceptions import EventAlreadyDelivered, InvalidRunState, RunNotFound
from agent_runtime.records import RunStatus
from store.dialects import PerDialect, insert
from store.models import events, runs
from store.notify import CHANNEL, woken
from store.row_checks import row_has

LOCK_RUN = select(runs.c.status).where(runs.c.id == bindparam("run_id")).with_for_update()
STORE_EVENT = PerDialect(
    lambda name: (
        insert(events, name)
        .values(
            run_id=bindparam("run_id"),
            key=bindparam("key"),
            data=bindparam("data", type_=events.c.data.type),
            delivered_at=bindparam("now", type_=events.c.delivered_at.type),
        )
        .on_conflict_do_nothing()
        .returning(events.c.run_id)
    )
)
WOKEN = {
    "status": RunStatus.PENDING.value,
    "due_at": bindparam("now", type_=runs.c.due_at.type),
    "wait_key": None,
    "updated_at": bindparam("now", type_=runs.c.updated_at.type),
}
"""What waking a run sets: due now, waiting for nothing."""
WAKE = (
    update(runs)
    .where(
        runs.c.id == bindparam("run_id"),
        row_has(runs.c.status, RunStatus.WAITING.value),
        runs.c.wait_key == bindparam("key"),
    )
    .values(WOKEN)
)
WAKE_RUN = {
    "postgresql": WAKE.returning(func.pg_notify(CHANNEL, "")),  # the wake-up in the same trip
    "sqlite": WAKE,
}
"""The statements of a delivery, built once."""


def deliver(
    conn: Connection, run_id: str, key: str, data: Any, now: datetime, *, strict: bool = True
) -> None:
    """Store the event and make the run pending (and wake the workers) if it waits for ``key``.

    Raises ``RunNotFound``, ``InvalidRunState`` for a finished run and
    ``EventAlreadyDelivered`` for a key already used — unless not ``strict``: then a
    finished run or a used key is left as it is.
    """
    # Lock the run first: a run suspending on ``key`` at this moment then either commits
    # before us (and we wake it) or sees our event when it checks (and stays pending).
    params = {"run_id": run_id, "key": key, "data": data, "now": now}
    status = conn.execute(LOCK_RUN, params).scalar()
    if status is None:
        raise RunNotFound(run_id)
    if RunStatus(status).finished:
        if not strict:
            return
        raise InvalidRunState(run_id, status, "signal")
    stored = conn.execute(STORE_EVENT[conn.dialect.name], params).first()
    if stored is None:  # the key was delivered before
        if strict:
            raise EventAlreadyDelivered(run_id, key)
        return
    if conn.execute(WAKE_RUN[conn.dialect.name], params).rowcount:
        woken(conn)


LOCK_RUNS = (
    select(runs.c.id, runs.c.status)
    .where(runs.c.id.in_(bindparam("run_ids", expanding=True)))
    .order_by(runs.c.id)
    .with_for_update()
)
STORE_EVENTS = PerDialect(
    lambda name: (
        insert(events, name).on_conflict_do_nothing().returning(events.c.run_id, events.c.key)
    )
)
WAKE_MANY = (
    update(runs)
    .where(
        row_has(runs.c.status, RunStatus.WAITING.value),
        tuple_(runs.c.id, runs.c.wait_key).in_(bindparam("waits", expanding=True)),
    )
    .values(WOKEN)
)
WAKE_RUNS = {
    "postgresql": WAKE_MANY.returning(func.pg_notify(CHANNEL, "")),
    "sqlite": WAKE_MANY,
}
"""The statements of several deliveries at once, built once."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event for a run: what ``deliver`` stores."""

    run_id: str
    key: str
    data: Any
    now: datetime


def deliver_many(conn: Connection, deliveries: Sequence[Delivery]) -> None:
    """``deliver`` of each of ``deliveries`` (not strict), in a few statements whatever their
    number: the runs locked in one (in id order), the events stored in one, the waiting runs
    made pending in one, as of the latest delivery's time.

    Raises ``RunNotFound`` if a run does not exist.
    """
    if not deliveries:
        return
    run_ids = sorted({d.run_id for d in deliveries})
    statuses = {row.id: row.status for row in conn.execute(LOCK_RUNS, {"run_ids": run_ids})}
    missing = [run_id for run_id in run_ids if run_id not in statuses]
    if missing:
        raise RunNotFound(missing[0])
    live = [d for d in deliveries if not RunStatus(statuses[d.run_id]).finished]
    if not live:
        return
    rows = [{"run_id": d.run_id, "key": d.key, "data": d.data, "delivered_at": d.now} for d in live]
    stored = [tuple(row) for row in conn.execute(STORE_EVENTS[conn.dialect.name], rows)]
    if not stored:  # every key was delivered before
        return
    now = max(d.now for d in live)
    made_due = conn.execute(WAKE_RUNS[conn.dialect.name], {"waits": stored, "now": now})
    if made_due.rowcount:
        woken(conn)
