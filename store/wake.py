"""Delivering an event to a run inside a caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects import postgresql, sqlite

from agent_runtime.exceptions import EventAlreadyDelivered, InvalidRunState, RunNotFound
from agent_runtime.records import RunStatus
from store.models import events, runs


def deliver(
    conn: Connection, run_id: str, key: str, data: Any, now: datetime, *, strict: bool = True
) -> None:
    """Store the event and make the run pending if it waits for ``key``.

    Raises ``RunNotFound``, ``InvalidRunState`` for a finished run and
    ``EventAlreadyDelivered`` for a key already used — unless not ``strict``: then a
    finished run or a used key is left as it is.
    """
    # Lock the run first: a run suspending on ``key`` at this moment then either commits
    # before us (and we wake it) or sees our event when it checks (and stays pending).
    status = conn.execute(
        select(runs.c.status).where(runs.c.id == run_id).with_for_update()
    ).scalar()
    if status is None:
        raise RunNotFound(run_id)
    if RunStatus(status).finished:
        if not strict:
            return
        raise InvalidRunState(run_id, status, "signal")
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stored = conn.execute(
        dialect.insert(events)
        .values(run_id=run_id, key=key, data=data, delivered_at=now)
        .on_conflict_do_nothing()
        .returning(events.c.run_id)
    ).first()
    if stored is None:  # the key was delivered before
        if strict:
            raise EventAlreadyDelivered(run_id, key)
        return
    conn.execute(
        update(runs)
        .where(
            runs.c.id == run_id, runs.c.status == RunStatus.WAITING.value, runs.c.wait_key == key
        )
        .values(status=RunStatus.PENDING.value, due_at=now, wait_key=None, updated_at=now)
    )
