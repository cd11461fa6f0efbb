"""The Home tabs people have opened, and the refresh notices that keep them current.

A change that concerns a person (an approval they may decide, their run's, their grant)
queues a ``HOME_REFRESH`` notice for them in its own transaction. The store keeps it only if
that person has opened the app's Home tab in the workspace, and keeps one of theirs waiting
at a time: while one is queued and no dispatcher has begun sending it, a later change is
shown by it (the dispatcher builds the view once the send has begun). A refresh queued
after one began is due ``REFRESH_SPACING`` after that one, so a burst of changes publishes
each person's tab a few times, not once per change.

When a workspace removes the app its tabs are forgotten, with its Home notices not yet being
sent (``SqlHomeTabs.forget_workspace``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, Engine, bindparam, delete, select, tuple_, update

from agent_runtime import Actor
from agent_runtime.notices import Notice
from store import dialects
from store.connections import reading, writing
from store.models import outbox, slack_home_tabs
from store.outbox_rows import PENDING, insert_notices
from store.row_checks import row_has

HOME_REFRESH = "home.refresh"
"""The kind of notice that re-publishes a person's Home tab: ``data["user"]`` is the person
(an Actor's JSON) and the notice's workspace is theirs; the store numbers its key."""
REFRESH_SPACING = timedelta(seconds=2)
"""How long after one refresh of a person's tab the next may be sent."""

Person = tuple[str, str]
"""A workspace (the Grid organization, on Grid) and a user id in it."""


def person_of(notice: Notice) -> Person:
    """The person a ``HOME_REFRESH`` notice is for."""
    return notice.enterprise_id or notice.team_id, str(notice.data["user"]["user_id"])


def refreshes_by_person(notices: Sequence[Notice]) -> dict[Person, Notice]:
    """The refresh notice of each person among ``notices`` (their last one)."""
    return {person_of(n): n for n in notices}


class SqlHomeTabs:
    """The people who opened their Home tab, over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def opened(self, actor: Actor, publish: Sequence[Notice], now: datetime) -> None:
        """Record that ``actor`` opened their Home tab, and queue ``publish`` with it."""
        insert = dialects.insert(slack_home_tabs, self.engine.dialect.name).values(
            workspace=actor.workspace, user_id=actor.user_id, opened_at=now, refreshes=0
        )
        with writing(self.engine) as conn:
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["workspace", "user_id"], set_={"opened_at": now}
                )
            )
            insert_notices(conn, publish, now)

    def has_opened(self, actor: Actor) -> bool:
        """Tell whether ``actor`` has opened their Home tab in their workspace."""
        query = select(slack_home_tabs.c.opened_at).where(*_is((actor.workspace, actor.user_id)))
        with reading(self.engine) as conn:
            return conn.execute(query).first() is not None

    def forget_workspace(self, enterprise_id: str, team_id: str, kinds: Sequence[str]) -> int:
        """Forget the tabs opened in a workspace that removed the app (in the organization,
        for an organization-wide installation: ``team_id`` '') and drop its notices of
        ``kinds`` whose send has not begun, in one transaction; return how many tabs.

        A workspace of a Grid organization keeps its tabs: they are the organization's
        people's, of its other workspaces too. Sent notices go as well: a tab opened again
        after a new install numbers its refreshes afresh and must find their keys free."""
        notices = delete(outbox).where(
            outbox.c.run_id.is_(None),
            outbox.c.kind.in_(kinds),
            outbox.c.sending_at.is_(None),
            (outbox.c.team_id == team_id) if team_id else (outbox.c.enterprise_id == enterprise_id),
        )
        with writing(self.engine) as conn:
            conn.execute(notices)
            if enterprise_id and team_id:
                return 0
            tabs = delete(slack_home_tabs).where(
                slack_home_tabs.c.workspace == (enterprise_id or team_id)
            )
            return int(conn.execute(tabs).rowcount)


OPENED_AMONG = select(
    slack_home_tabs.c.workspace,
    slack_home_tabs.c.user_id,
    slack_home_tabs.c.refreshes,
    slack_home_tabs.c.refresh_due_at,
).where(
    tuple_(slack_home_tabs.c.workspace, slack_home_tabs.c.user_id).in_(
        bindparam("people", expanding=True)
    )
)
"""The tabs ``people`` (workspace and user id pairs) opened, with their refresh numbers and
times: built once, so each change only binds its people (40 % of the client time of
building it per call on SQLite, 60 % on PostgreSQL)."""


def queue_refreshes(conn: Connection, notices: Sequence[Notice], now: datetime) -> None:
    """Queue each person's refresh in the caller's transaction, if they opened their tab
    and none of theirs is still waiting to be sent.

    One read finds which of them opened their tab (usually none, and then it is the only
    statement)."""
    chosen = refreshes_by_person(notices)
    if not chosen:
        return
    opened = conn.execute(OPENED_AMONG, {"people": list(chosen)}).all()
    tabs = {(row.workspace, row.user_id): row for row in opened}
    for person in sorted(tabs):  # one lock order: two changes never wait on each other
        row = tabs[person]
        _refresh(conn, person, chosen[person], row.refreshes, row.refresh_due_at, now)


def _refresh(
    conn: Connection,
    person: Person,
    notice: Notice,
    refreshes: int,
    last: datetime | None,
    now: datetime,
) -> None:
    if _still_waiting(conn, _numbered(notice, refreshes).key):
        return
    due = now if last is None else max(now, last + REFRESH_SPACING)
    number = conn.execute(
        update(slack_home_tabs)
        .where(*_is(person))
        .values(refreshes=slack_home_tabs.c.refreshes + 1, refresh_due_at=due)
        .returning(slack_home_tabs.c.refreshes)
    ).scalar_one()
    insert_notices(conn, [_numbered(notice, number)], now, due=due)


def _still_waiting(conn: Connection, key: str) -> bool:
    """Tell whether the notice ``key`` is queued and its send has not begun, and keep it so
    until the caller commits: the no-op update locks its row, so a dispatcher beginning the
    send waits for this transaction (and then shows its change), or has begun already."""
    held = conn.execute(
        update(outbox)
        .where(
            outbox.c.key == key, row_has(outbox.c.status, PENDING), outbox.c.sending_at.is_(None)
        )
        .values(next_at=outbox.c.next_at)
    )
    return held.rowcount == 1


def _numbered(notice: Notice, number: int) -> Notice:
    return replace(notice, key=f"{notice.key}:{number}")


def _is(person: Person) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    return slack_home_tabs.c.workspace == person[0], slack_home_tabs.c.user_id == person[1]


__all__ = [
    "HOME_REFRESH",
    "REFRESH_SPACING",
    "SqlHomeTabs",
    "person_of",
    "queue_refreshes",
    "refreshes_by_person",
]
