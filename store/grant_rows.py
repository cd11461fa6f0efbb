"""Grants as rows: reading, writing and locking them inside an approval store's transactions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, select, update

from agent_runtime.approvals import Actor
from agent_runtime.grants import Grant, GrantScope
from agent_runtime.rules import parse_predicate
from store import dialects
from store.json_filters import in_workspace, text_is
from store.models import grants


def insert_grant(conn: Connection, grant: Grant) -> Grant | None:
    """Insert the grant; if its id exists, return the stored one instead."""
    added = conn.execute(
        dialects.insert(grants, conn.dialect.name)
        .values(_row(grant))
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(grants.c.id)
    ).first()
    if added is not None:
        return None
    return _grant(conn.execute(select(grants).where(grants.c.id == grant.id)).one())


def locked_grant(conn: Connection, grant_id: str) -> Grant | None:
    """Return the grant, its row locked until the transaction ends (None if there is none)."""
    query = select(grants).where(grants.c.id == grant_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    return None if row is None else _grant(row)


def read_grant(conn: Connection, grant_id: str) -> Grant | None:
    """Return the grant (None if there is none)."""
    row = conn.execute(select(grants).where(grants.c.id == grant_id)).first()
    return None if row is None else _grant(row)


def select_grants(
    conn: Connection,
    *,
    active_at: datetime | None,
    tool: str | None,
    limit: int,
    granted_by: Actor | None = None,
) -> list[Grant]:
    """Return grants newest first, of ``tool``, in force at ``active_at`` and given by
    ``granted_by`` (in their workspace) if given."""
    query = select(grants).order_by(grants.c.granted_at.desc(), grants.c.id.desc()).limit(limit)
    if granted_by is not None:
        dialect = conn.dialect.name
        column = grants.c.granted_by
        query = query.where(
            text_is(column, "user_id", granted_by.user_id, dialect),
            in_workspace(column, granted_by.workspace, dialect),
        )
    if tool is not None:
        query = query.where(grants.c.tool == tool)
    if active_at is not None:
        query = query.where(grants.c.revoked_at.is_(None), grants.c.expires_at > active_at)
    return [_grant(row) for row in conn.execute(query)]


def mark_revoked(conn: Connection, revoked: Grant) -> bool:
    """Record the revocation unless the grant is revoked already; tell whether it was."""
    assert revoked.revoked_by is not None
    result = conn.execute(
        update(grants)
        .where(grants.c.id == revoked.id, grants.c.revoked_at.is_(None))
        .values(revoked_by=revoked.revoked_by.to_json(), revoked_at=revoked.revoked_at)
    )
    return bool(result.rowcount)


def _row(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id,
        "tool": grant.tool,
        "scope": grant.scope.value,
        "run_id": grant.run_id,
        "source_approval": grant.source_approval,
        "predicate": grant.when.to_json(),
        "granted_by": grant.granted_by.to_json(),
        "granted_at": grant.granted_at,
        "expires_at": grant.expires_at,
        "revoked_by": None if grant.revoked_by is None else grant.revoked_by.to_json(),
        "revoked_at": grant.revoked_at,
    }


def _grant(row: Row[Any]) -> Grant:
    return Grant(
        id=row.id,
        tool=row.tool,
        scope=GrantScope(row.scope),
        run_id=row.run_id,
        source_approval=row.source_approval,
        when=parse_predicate(row.predicate),
        granted_by=Actor.from_json(row.granted_by),
        granted_at=row.granted_at,
        expires_at=row.expires_at,
        revoked_by=None if row.revoked_by is None else Actor.from_json(row.revoked_by),
        revoked_at=row.revoked_at,
    )
