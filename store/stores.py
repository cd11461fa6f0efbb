"""The stores the application uses, all over one engine, and what it asks of the schema."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

import store
from agent_runtime.built_once import built_once
from store.engine import transaction_pooled
from store.errors import translated
from store.migrate import covers, current_revision, is_current, latest_revision, upgrade
from store.planner_stats import StaleTable, stale_statistics
from store.pooler import check_pooling
from store.stats import Stats, read_stats

if TYPE_CHECKING:
    from agent_runtime.audit_keys import AuditKeys
    from store.api_store import SqlApiStore
    from store.approval_store import SqlApprovalStore
    from store.archive import ImportResult, PruneResult
    from store.home_tabs import SqlHomeTabs
    from store.notify import WakeListener
    from store.outbox import SqlOutbox
    from store.replay_guard import SqlReplayGuard
    from store.slack_installations import SqlInstallations
    from store.sql_store import SqlStore


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """The revision a database is at (None when empty) and the newest this code knows."""

    current: str | None
    latest: str

    @property
    def up_to_date(self) -> bool:
        """Whether the database has every migration this code knows (a newer schema has:
        the code runs on it during a rolling upgrade)."""
        return covers(self.current)

    @property
    def newer(self) -> bool:
        """Whether the database's schema is newer than this code's (a later release's)."""
        return self.current is not None and self.current > self.latest


class Stores:
    """Every store the application needs, sharing one engine (build it with ``store.open``).

    Each store is made, and its module imported (through ``store``'s exports), when first
    used: a command builds only the stores it reads or writes (``signoff runs``: the runs').
    """

    def __init__(self, engine: Engine, audit_keys: AuditKeys | None = None) -> None:
        """The stores over ``engine``; ``audit_keys`` sign the approvals' audit log."""
        self.engine = engine
        self._audit_keys = audit_keys

    @classmethod
    def over(cls, engine: Engine, audit_keys: AuditKeys | None = None) -> Stores:
        """Return the stores over ``engine``; ``audit_keys`` sign the approvals' audit log."""
        return cls(engine, audit_keys)

    @built_once
    def runs(self) -> SqlStore:
        """The runtime's store of runs and their journals."""
        return store.SqlStore(self.engine)

    @built_once
    def approvals(self) -> SqlApprovalStore:
        """The approvals, their decisions, grants and audit log."""
        return store.SqlApprovalStore(self.engine, self._audit_keys)

    @built_once
    def outbox(self) -> SqlOutbox:
        """The messages waiting to go to Slack and webhooks."""
        return store.SqlOutbox(self.engine)

    @built_once
    def api(self) -> SqlApiStore:
        """The approvals API's keys and requests."""
        return store.SqlApiStore(self.engine)

    @built_once
    def replays(self) -> SqlReplayGuard:
        """The Slack requests already handled."""
        return store.SqlReplayGuard(self.engine)

    @built_once
    def installations(self) -> SqlInstallations:
        """The Slack workspaces Signoff is installed in."""
        return store.SqlInstallations(self.engine)

    @built_once
    def home_tabs(self) -> SqlHomeTabs:
        """The Home tabs people have opened."""
        return store.SqlHomeTabs(self.engine)

    def wake_listener(self, on_wake: Callable[[], object]) -> WakeListener:
        """Return a listener (not started) that calls ``on_wake`` when a run may be runnable."""
        return store.WakeListener(self.engine, on_wake)

    def upgrade(self) -> str | None:
        """Apply every migration the database lacks; return the revision it was at (read
        under the migrations' lock: of two processes upgrading at once, the second finds
        the first's)."""
        with translated():
            return upgrade(self.engine)

    def schema(self) -> SchemaStatus:
        """Return the database's revision and the newest (``StoreUnavailable`` if unreachable)."""
        with translated():
            current = current_revision(self.engine)
        return SchemaStatus(current=current, latest=latest_revision())

    def schema_is_current(self) -> bool:
        """Tell whether the schema has every migration this code knows; a newer one counts."""
        return is_current(self.engine)

    @property
    def pooled_by_transaction(self) -> bool:
        """Whether the database URL says ``pooling=transaction`` (``store.engine``)."""
        return transaction_pooled(self.engine)

    def check_pooling(self) -> None:
        """Raise ``InvalidConfiguration`` if a pooler lends server connections per
        transaction and the database URL does not say so (``store.pooler``)."""
        check_pooling(self.engine)

    def stats(self, now: datetime) -> Stats:
        """Return the counts the metrics report."""
        return read_stats(self.engine, now)

    def stale_statistics(self) -> list[StaleTable]:
        """The tables the planner's statistics no longer describe (``store.planner_stats``)."""
        return stale_statistics(self.engine)

    def prune(
        self, *, cutoff: datetime, archive: Path | None = None, dry_run: bool = False
    ) -> PruneResult:
        """Remove the finished runs last updated before ``cutoff``, archiving them if asked."""
        from store.archive import prune

        return prune(self.engine, cutoff=cutoff, archive=archive, dry_run=dry_run)

    def import_archive(self, path: Path) -> ImportResult:
        """Restore the runs of the archive at ``path``."""
        from store.archive import import_archive

        return import_archive(self.engine, path)

    def close(self) -> None:
        """Close the engine's connections."""
        self.engine.dispose()
