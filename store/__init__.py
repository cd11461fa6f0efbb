"""Signoff's SQL storage: the runtime's Store on SQLite (embedded default) and PostgreSQL.

``store.open(url)`` is the one entry point: it returns a ``Stores`` value holding every
store the application needs over one engine. Everything a caller names is exported here,
each name imported from its module when first used (``DEFAULT_URL`` needs no SQLAlchemy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_runtime.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from agent_runtime.audit_keys import AuditKeys
    from store.api_store import ApiKey, ApiRequest, RunDraft, SqlApiStore
    from store.approval_store import SqlApprovalStore
    from store.archive import ArchiveError, ImportResult, PruneResult
    from store.engine import build_engine
    from store.errors import translated
    from store.home_tabs import HOME_REFRESH, SqlHomeTabs
    from store.migrate import latest_revision, upgrade
    from store.notify import WakeListener
    from store.outbox import WEBHOOK, SqlOutbox
    from store.planner_stats import StaleTable
    from store.replay_guard import SqlReplayGuard
    from store.slack_installations import SqlInstallations
    from store.sql_store import SqlStore
    from store.stats import Stats
    from store.stores import SchemaStatus, Stores
    from store.url_passwords import masked_url, url_secrets

DEFAULT_URL = "sqlite:///signoff.db"
"""The database ``SIGNOFF_DATABASE_URL`` names when it is not set."""

_MODULE_OF = {
    "ApiKey": "api_store",
    "ApiRequest": "api_store",
    "RunDraft": "api_store",
    "SqlApiStore": "api_store",
    "SqlApprovalStore": "approval_store",
    "ArchiveError": "archive",
    "ImportResult": "archive",
    "PruneResult": "archive",
    "build_engine": "engine",
    "translated": "errors",
    "HOME_REFRESH": "home_tabs",
    "SqlHomeTabs": "home_tabs",
    "latest_revision": "migrate",
    "upgrade": "migrate",
    "WakeListener": "notify",
    "WEBHOOK": "outbox",
    "SqlOutbox": "outbox",
    "StaleTable": "planner_stats",
    "SqlReplayGuard": "replay_guard",
    "SqlInstallations": "slack_installations",
    "SqlStore": "sql_store",
    "Stats": "stats",
    "SchemaStatus": "stores",
    "Stores": "stores",
    "masked_url": "url_passwords",
    "url_secrets": "url_passwords",
}
"""The module (under ``store``) of each public name."""


__getattr__ = lazy_exports(__name__, _MODULE_OF, globals())


# Read as ``store.open``, as ``shelve.open`` and ``tarfile.open`` are.
def open(
    url: str = DEFAULT_URL, *, migrate: bool = True, audit_keys: AuditKeys | None = None
) -> Stores:
    """Connect to ``url``, bring its schema up to date (unless told not to) and return the
    stores over it; ``audit_keys`` sign the approvals' audit log."""
    from store.engine import build_engine
    from store.stores import Stores

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
    "StaleTable",
    "Stats",
    "Stores",
    "WakeListener",
    "build_engine",
    "latest_revision",
    "masked_url",
    "open",
    "open_store",
    "translated",
    "upgrade",
    "url_secrets",
]
