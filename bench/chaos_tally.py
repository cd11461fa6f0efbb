"""What the chaos suite reads: the database (through faults), the provider's ledger, Slack.

``Probe`` reads with a bare driver connection that it opens again after the database went
away, so the driver keeps reading across a restart or a ``pg_terminate_backend``.
``tally`` counts what must never happen: a charge or an email twice, an approval decided
twice, a Slack message lost or posted twice.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from agent_runtime import Decision
from tests.integration.slack_harness import SlackWorld
from tests.integration.slack_readers import is_card_of, posts_per_message

PROGRESS = (
    "SELECT (SELECT count(*) FROM steps) + (SELECT count(*) FROM outbox WHERE status = 'sent')"
    " + (SELECT count(*) FROM approvals WHERE status <> 'pending')"
)
DECISIONS = tuple(d.value for d in Decision)


class Probe:
    """Autocommit reads of the chaos database; None while the database is unreachable."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url).set(drivername="postgresql")
        self._libpq = url.render_as_string(hide_password=False)
        self._connection: psycopg.Connection[Any] | None = None

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]] | None:
        """Run ``query``; None (and a fresh connection next time) if the database is away."""
        try:
            if self._connection is None or self._connection.closed:
                self._connection = psycopg.connect(self._libpq, autocommit=True, connect_timeout=2)
            return list(self._connection.execute(query, params).fetchall())
        except psycopg.OperationalError:
            self.close()
            return None

    def progress(self) -> int | None:
        """Journal entries + delivered notices + decided approvals, all runs together."""
        found = self.rows(PROGRESS)
        return None if found is None else int(found[0][0])

    def status(self, run_id: str) -> str | None:
        """The run's status now."""
        found = self.rows("SELECT status FROM runs WHERE id = %s", uuid.UUID(hex=run_id))
        return None if not found else str(found[0][0])

    def created_at(self, run_id: str) -> datetime | None:
        """When the run was created (None while it does not exist)."""
        found = self.rows("SELECT created_at FROM runs WHERE id = %s", uuid.UUID(hex=run_id))
        return None if not found else found[0][0]

    def journal(self, run_id: str) -> int | None:
        """The run's journal length now."""
        found = self.rows("SELECT count(*) FROM steps WHERE run_id = %s", uuid.UUID(hex=run_id))
        return None if found is None else int(found[0][0])

    def pending_approvals(self, run_id: str) -> list[str] | None:
        """The ids of the run's pending approvals."""
        found = self.rows(
            "SELECT id FROM approvals WHERE run_id = %s AND status = 'pending' ORDER BY position",
            uuid.UUID(hex=run_id),
        )
        return None if found is None else [str(r[0]) for r in found]

    def undelivered(self) -> int | None:
        """How many notices are not delivered (pending or given up)."""
        found = self.rows("SELECT count(*) FROM outbox WHERE status <> 'sent'")
        return None if found is None else int(found[0][0])

    def terminate_all(self) -> int:
        """``pg_terminate_backend`` every other connection to the database; return how many."""
        found = self.rows(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return 0 if not found else int(found[0][0])

    def close(self) -> None:
        """Close the connection (if any)."""
        if self._connection is not None:
            self._connection.close()
        self._connection = None


@dataclass(frozen=True)
class Tally:
    """What the chaos suite counts at the end: every figure but ``completed`` must be 0."""

    started: int
    completed: int
    duplicate_charges: int
    duplicate_emails: int
    decided_twice: int
    messages_lost: int
    messages_doubled: int


def _extra(keys: list[str]) -> int:
    return sum(n - 1 for n in Counter(keys).values() if n > 1)


def tally(world: SlackWorld, probe: Probe, runs: list[str]) -> Tally:
    """Count the runs completed and everything that happened twice or not at all."""
    statuses = [probe.status(r) for r in runs]
    ledger = world.provider.ledger
    charges = [c.idempotency_key.rsplit("-", 1)[0] for c in ledger.charges()]
    emails = [e.dedupe_id.rsplit("-", 1)[0] for e in ledger.emails()]
    decided = probe.rows(
        "SELECT approval_id FROM audit_log WHERE action = ANY(%s)", list(DECISIONS)
    )
    return Tally(
        started=len(runs),
        completed=statuses.count("completed"),
        duplicate_charges=_extra(charges),
        duplicate_emails=_extra(emails),
        decided_twice=_extra([str(r[0]) for r in decided or []]),
        messages_lost=(probe.undelivered() or 0) + _rootless(world, runs),
        messages_doubled=sum(n - 1 for n in posts_per_message(world).values() if n > 1),
    )


def _rootless(world: SlackWorld, runs: list[str]) -> int:
    """Runs with no root message in the channel."""
    roots = world.roots()
    return sum(
        1
        for run_id in runs
        if not any(b.get("block_id") == f"run:{run_id}" for m in roots for b in m.blocks or [])
    )


def card_in_slack(world: SlackWorld, approval_id: str) -> Any:
    """The first message in the channel or its threads that is the approval's card, if any."""
    for root in world.roots():
        for message in [root, *world.workspace.messages(world.channel, thread_ts=root.ts)]:
            if is_card_of(message, approval_id):
                return message
    return None
