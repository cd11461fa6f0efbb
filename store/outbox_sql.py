"""The outbox's per-notice statements, compiled once and run on autocommit connections.

A dispatcher makes two fenced writes for every notice it sends (the send begun, then its
outcome) and reads where earlier notices landed. Each is one statement and so a
transaction of its own: run as ``store.driver.Prepared`` statements they take one round
trip each, with no BEGIN and COMMIT and no per-call statement building — the same writes,
with the same fence, as before.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Dialect, bindparam, exists, func, or_, select, update

from store.driver import Prepared
from store.models import outbox
from store.outbox_rows import DEAD, PENDING, SENT
from store.row_checks import row_has

STAMP = outbox.c.claimed_until.type
"""The type of the outbox's times (all the same)."""
WEBHOOK = "webhook"
"""The kind of notice the webhook sender delivers; every other kind goes to Slack."""


def claim_statement(*, postgres: bool, webhooks: bool) -> Any:
    """Claim up to ``:limit`` notices due at ``:now`` for ``:owner`` until ``:until``, oldest
    first, never one whose run has an older one undelivered (only webhooks with ``webhooks``,
    else only the others), RETURNING them: one statement, so one transaction. On PostgreSQL
    ``SKIP LOCKED`` keeps concurrent claimers apart."""
    now = bindparam("now", type_=STAMP)
    due, older = outbox.alias("due"), outbox.alias("older")
    blocked = exists().where(
        older.c.run_id == due.c.run_id, older.c.id < due.c.id, older.c.status == PENDING
    )
    pick = (
        select(due.c.id)
        .where(
            due.c.status == PENDING,
            due.c.next_at <= now,
            or_(due.c.claimed_until.is_(None), due.c.claimed_until <= now),
            or_(due.c.run_id.is_(None), ~blocked),
            (due.c.kind == WEBHOOK) if webhooks else (due.c.kind != WEBHOOK),
        )
        .order_by(due.c.id)
        .limit(bindparam("limit"))
    )
    if postgres:
        pick = pick.with_for_update(skip_locked=True, of=due)
    return (
        update(outbox)
        .where(outbox.c.id.in_(pick))
        .values(
            claimed_by=bindparam("owner"),
            claimed_until=bindparam("until", type_=STAMP),
            attempts=outbox.c.attempts + 1,
            fence=outbox.c.fence + 1,
        )
        .returning(*outbox.c)
    )


def _fenced(**values: Any) -> Any:
    """UPDATE the notice ``:item_id`` while its claim ``:item_fence`` is the latest."""
    return (
        update(outbox)
        .where(
            outbox.c.id == bindparam("item_id"),
            outbox.c.fence == bindparam("item_fence"),
            row_has(outbox.c.status, PENDING),
        )
        .values(**values)
    )


BEGIN_SEND = _fenced(
    sending_at=func.coalesce(outbox.c.sending_at, bindparam("at", type_=STAMP)),
    claimed_until=bindparam("until", type_=STAMP),
)
"""The send begins (the earliest such time is kept) and the claim is extended."""

DELIVERED = _fenced(
    status=SENT,
    delivered_at=bindparam("at", type_=STAMP),
    claimed_until=None,
    sending_at=None,
    channel=func.coalesce(bindparam("landed_in", type_=outbox.c.channel.type), outbox.c.channel),
    ts=func.coalesce(bindparam("landed_ts", type_=outbox.c.ts.type), outbox.c.ts),
)
"""The delivery is recorded (with where it landed, when known)."""

RETRY = _fenced(
    next_at=bindparam("at", type_=STAMP), claimed_until=None, last_error=bindparam("error")
)
"""The claim is released for another attempt at ``:at``; an earlier send stays uncertain."""

RETRY_NOT_SENT = _fenced(
    next_at=bindparam("at", type_=STAMP),
    claimed_until=None,
    last_error=bindparam("error"),
    sending_at=None,
)
"""As ``RETRY``, for a send known not to have reached Slack."""

GIVE_UP = _fenced(status=DEAD, claimed_until=None, sending_at=None, last_error=bindparam("error"))
"""The notice is dead: it stops holding up its run's later notices."""

DELIVERY = select(outbox.c.channel, outbox.c.ts).where(
    outbox.c.key == bindparam("notice_key"), row_has(outbox.c.status, SENT)
)
"""Where a notice was delivered."""

STATUS = select(outbox.c.status).where(outbox.c.key == bindparam("notice_key"))
"""A notice's status."""


class OutboxStatements:
    """The statements above, compiled for one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        postgres = dialect.name == "postgresql"
        self.claim = Prepared(claim_statement(postgres=postgres, webhooks=False), dialect, outbox.c)
        self.claim_webhooks = Prepared(
            claim_statement(postgres=postgres, webhooks=True), dialect, outbox.c
        )
        self.begin_send = Prepared(BEGIN_SEND, dialect)
        self.delivered = Prepared(DELIVERED, dialect)
        self.retry = Prepared(RETRY, dialect)
        self.retry_not_sent = Prepared(RETRY_NOT_SENT, dialect)
        self.give_up = Prepared(GIVE_UP, dialect)
        self.delivery = Prepared(DELIVERY, dialect, (outbox.c.channel, outbox.c.ts))
        self.status = Prepared(STATUS, dialect, (outbox.c.status,))
