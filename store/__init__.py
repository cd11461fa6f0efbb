"""Signoff's SQL storage: the runtime's Store on SQLite (embedded default) and PostgreSQL.

``store.open(url)`` is the one entry point: it returns a ``Stores`` value holding every
store the application needs over one engine. Everything a caller names is exported here.
"""

from agent_runtime.audit_keys import AuditKeys
from store.api_store import ApiKey, ApiRequest, RunDraft, SqlApiStore
from store.approval_store import SqlApprovalStore
from store.archive import ArchiveError, ImportResult, PruneResult
from store.engine import DEFAULT_URL, build_engine
from store.errors import translated
from store.home_tabs import HOME_REFRESH, SqlHomeTabs
from store.migrate import latest_revision, upgrade
from store.notify import WakeListener
from store.outbox import WEBHOOK, SqlOutbox
from store.replay_guard import SqlReplayGuard
from store.slack_installations import SqlInstallations
from store.sql_store import SqlStore
from store.stats import Stats
from store.stores import SchemaStatus, Stores


# Read as ``store.open``, as ``shelve.open`` and ``tarfile.open`` are.
def open(
    url: str = DEFAULT_URL, *, migrate: bool = True, audit_keys: AuditKeys | None = None
) -> Stores:
    """Connect to ``url``, bring its schema up to date (unless told not to) and return the
    stores over it; ``audit_keys`` sign the approvals' audit log."""
    stores = Stores.over(build_engine(url), audit_keys)
    if migrate:
        stores.upgrade()
    return stores


def open_store(url: str = DEFAULT_URL, *, migrate: bool = True) -> SqlStore:
    """Return the runtime's Store alone over ``url`` (``open`` gives every store)."""
    return open(url, migrate=migrate).runs


__all__ = [
    "DEFAULT_URL",
    "HOME_REFRESH",
    "WEBHOOK",
    "ApiKey",
    "ApiRequest",
    "ArchiveError",
    "ImportResult",
    "PruneResult",
    "RunDraft",
    "SchemaStatus",
    "SqlApiStore",
    "SqlApprovalStore",
    "SqlHomeTabs",
    "SqlInstallations",
    "SqlOutbox",
    "SqlReplayGuard",
    "SqlStore",
    "Stats",
    "Stores",
    "WakeListener",
    "build_engine",
    "latest_revision",
    "open",
    "open_store",
    "translated",
    "upgrade",
]
