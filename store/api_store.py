"""API clients and the approvals they ask for, on SQLAlchemy Core.

A client is known by the SHA-256 of its key; the key itself is never stored. Each request
for an approval takes a row whose id becomes the approval's position in its run, and
whose UNIQUE (client, idempotency key) makes a repeated request find the first one.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from agent_runtime.approvals import approval_id
from agent_runtime.notices import Notice
from agent_runtime.records import RunStatus
from store import dialects
from store.connections import reading, writing
from store.models import api_approvals, api_keys, runs
from store.notify import notify_wake
from store.outbox import write_notices


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API client as stored: never its key, only the key's hash."""

    name: str
    key_hash: str
    webhook_secret: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiRequest:
    """One client's request for an approval: the approval's run, position and id."""

    client: str
    idempotency_key: str
    request_hash: str
    run_id: str
    position: int
    approval_id: str
    callback_url: str | None
    created: bool
    """This call made the request (a repeated request finds the first one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDraft:
    """The run an API request belongs to, created on the first request that names it."""

    run_id: str
    workflow: str
    input: Any
    notices: Sequence[Notice] = ()


class SqlApiStore:
    """API keys and API-requested approvals over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _tx(self) -> AbstractContextManager[Connection]:
        return writing(self.engine)

    def _read(self) -> AbstractContextManager[Connection]:
        return reading(self.engine)

    def create_key(self, name: str, key_hash: str, webhook_secret: str, now: datetime) -> bool:
        """Store a new client; False if the name is taken."""
        with self._tx() as conn:
            added = conn.execute(
                dialects.insert(api_keys, conn.dialect.name)
                .values(
                    name=name,
                    key_hash=key_hash,
                    webhook_secret=webhook_secret,
                    created_at=now,
                    revoked_at=None,
                )
                .on_conflict_do_nothing()
                .returning(api_keys.c.name)
            ).first()
        return added is not None

    def keys(self) -> list[ApiKey]:
        """Return every client, oldest first."""
        with self._read() as conn:
            rows = conn.execute(select(api_keys).order_by(api_keys.c.created_at)).all()
        return [_key(r) for r in rows]

    def revoke(self, name: str, now: datetime) -> bool:
        """Revoke the client's key; False if no such live key."""
        with self._tx() as conn:
            done = conn.execute(
                update(api_keys)
                .where(api_keys.c.name == name, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
        return done.rowcount == 1

    def client(self, key_hash: str) -> ApiKey | None:
        """Return the live client whose key hashes to ``key_hash``."""
        with self._read() as conn:
            row = conn.execute(
                select(api_keys).where(
                    api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
                )
            ).first()
        return None if row is None else _key(row)

    def key_of(self, name: str) -> ApiKey | None:
        """Return the client called ``name``, revoked or not."""
        with self._read() as conn:
            row = conn.execute(select(api_keys).where(api_keys.c.name == name)).first()
        return None if row is None else _key(row)

    def open_request(
        self,
        client: str,
        idempotency_key: str,
        request_hash: str,
        run: RunDraft,
        callback_url: str | None,
        now: datetime,
    ) -> ApiRequest:
        """Record the request (creating its run if new) or find the one with the same key."""
        with self._tx() as conn:
            _ensure_run(conn, run, now)
            added = conn.execute(
                dialects.insert(api_approvals, conn.dialect.name)
                .values(
                    client=client,
                    idempotency_key=idempotency_key,
                    request_hash=request_hash,
                    run_id=run.run_id,
                    callback_url=callback_url,
                    created_at=now,
                )
                .on_conflict_do_nothing()
                .returning(api_approvals.c.id)
            ).first()
            if added is not None:
                conn.execute(
                    update(api_approvals)
                    .where(api_approvals.c.id == added.id)
                    .values(approval_id=approval_id(run.run_id, added.id))
                )
            row = conn.execute(
                select(api_approvals).where(
                    api_approvals.c.client == client,
                    api_approvals.c.idempotency_key == idempotency_key,
                )
            ).one()
        return _request(row, created=added is not None)

    def request_for(self, approval: str) -> ApiRequest | None:
        """Return the API request of the approval ``approval``, if an API client asked it."""
        with self._read() as conn:
            row = conn.execute(
                select(api_approvals).where(api_approvals.c.approval_id == approval)
            ).first()
        return None if row is None else _request(row, created=False)


def _ensure_run(conn: Connection, run: RunDraft, now: datetime) -> None:
    added = conn.execute(
        dialects.insert(runs, conn.dialect.name)
        .values(
            id=run.run_id,
            workflow=run.workflow,
            status=RunStatus.PENDING.value,
            input=run.input,
            created_at=now,
            updated_at=now,
            due_at=now,
            fence=0,
        )
        .on_conflict_do_nothing()
        .returning(runs.c.id)
    ).first()
    if added is not None:
        write_notices(conn, run.notices, now)
        notify_wake(conn)


def _key(row: Any) -> ApiKey:
    return ApiKey(
        name=row.name,
        key_hash=row.key_hash,
        webhook_secret=row.webhook_secret,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def _request(row: Any, *, created: bool) -> ApiRequest:
    return ApiRequest(
        client=row.client,
        idempotency_key=row.idempotency_key,
        request_hash=row.request_hash,
        run_id=row.run_id,
        position=row.id,
        approval_id=row.approval_id,
        callback_url=row.callback_url,
        created=created,
    )


__all__ = ["ApiKey", "ApiRequest", "RunDraft", "SqlApiStore"]
