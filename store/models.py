"""The database's tables: runs, their journal, failed attempts and delivered events.

The indexes declared in a dialect's own terms (partial, GIN) are in ``store.schema``, which
completes this ``metadata`` as the migrations build it: declaring them imports each dialect's
SQLAlchemy package, which a process writing rows on SQLite does not need PostgreSQL's of.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from agent_runtime.audit import AUDIT_SHARDS
from store.json_filters import ValueAt
from store.types import HexUuid, JSONValue, UTCDateTime

SHARD_RANGE = f"shard >= 0 AND shard < {AUDIT_SHARDS}"
"""The audit shards' numbers: the log has ``AUDIT_SHARDS`` chains."""

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""Every table, with the constraint naming convention."""


runs = Table(
    "runs",
    metadata,
    Column("id", HexUuid, primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("input", JSONValue, nullable=True),
    Column("output", JSONValue, nullable=True),
    Column("error", JSONValue, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("due_at", UTCDateTime, nullable=True),
    Column("wait_key", Text, nullable=True),
    Column("lease_owner", String(200), nullable=True),
    Column("fence", Integer, default=0, nullable=False),
    Column("forked_from", HexUuid, nullable=True),
    Column("fork_at", Integer, nullable=True),
    Index(None, "due_at"),
    Index(None, "forked_from"),
    Index(None, "status", "created_at", "id"),
    Index(None, "created_at", "id"),
)
"""A run. ``due_at`` is when it next needs a worker: now if pending, its wake-up time if
waiting, its lease expiry if running, NULL once finished."""

steps = Table(
    "steps",
    metadata,
    Column("run_id", HexUuid, primary_key=True),  # no foreign key: see migration 0019
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("name", Text, nullable=False),
    Column("input_hash", String(16), nullable=False),
    Column("output", JSONValue, nullable=True),
    Column("error", JSONValue, nullable=True),
    Column("attempts", SmallInteger, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=False),
)
"""One journal entry: the committed result of the step at ``position``. Its run exists:
the fenced append writes an entry only under a run's lease (``store.run_sql``), and a
fork's entries are copied as the fork is created; pruning deletes a run's entries with it."""

attempts = Table(
    "attempts",
    metadata,
    Column("run_id", HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("attempt", Integer, primary_key=True, autoincrement=False),
    Column("error", JSONValue, nullable=False),
    Column("at", UTCDateTime, nullable=False),
)
"""A failed attempt of a step."""

events = Table(
    "events",
    metadata,
    Column("run_id", HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("data", JSONValue, nullable=True),
    Column("delivered_at", UTCDateTime, nullable=False),
)
"""An event delivered to a run; one per key."""

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(24), primary_key=True),
    Column("run_id", HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("args", JSONValue, nullable=False),
    Column("args_hash", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("policy", JSONValue, nullable=False),
    Column("requester", JSONValue, nullable=False),
    Column("requested_at", UTCDateTime, nullable=False),
    Column("deadline", UTCDateTime, nullable=False),
    Column("reason_asked", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("votes", JSONValue, nullable=False),
    Column("decided_by", JSONValue, nullable=True),
    Column("decided_at", UTCDateTime, nullable=True),
    Column("decided_args", JSONValue, nullable=True),
    Column("decided_args_hash", String(64), nullable=True),
    Column("reason", Text, nullable=True),
    Column("diff", JSONValue, nullable=True),
    Column("escalated", Boolean, nullable=False),
    Column("remind_at", UTCDateTime, nullable=True),
    # The earlier of deadline and reminder while pending, NULL once decided (the sweep's partial
    # index).
    Column("next_due_at", UTCDateTime, nullable=True),
    Column("consumed_by", Integer, nullable=True),
    # What the call would do, as shown to approvers (NULL: the tool declared no preview).
    Column("preview", JSONValue, nullable=True),
    Column("preview_digest", String(64), nullable=True),
    Column("version", Integer, nullable=False),
    Index(None, "run_id"),
    Index(None, "status", "requested_at", "position", "id"),
    Index(None, "requested_at", "position", "id"),
)
"""An approval: what was asked, under which policy, and who decided what."""

grants = Table(
    "grants",
    metadata,
    Column("id", String(16), primary_key=True),
    Column("tool", String(200), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("run_id", HexUuid, nullable=False),
    Column("source_approval", String(24), nullable=False),
    Column("predicate", JSONValue, nullable=False),
    Column("granted_by", JSONValue, nullable=False),
    Column("granted_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("revoked_by", JSONValue, nullable=True),
    Column("revoked_at", UTCDateTime, nullable=True),
    Index(None, "tool", "expires_at"),
    Index(None, "granted_at"),
)
"""A grant: calls of ``tool`` matching ``predicate`` that ``granted_by`` approved ahead of
time, in the run ``run_id`` (scope ``run``) or in any run (scope ``day``), until
``expires_at`` or its revocation."""

audit_log = Table(
    "audit_log",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("at", UTCDateTime, nullable=False),
    Column("approval_id", String(24), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("action", String(32), nullable=False),
    Column("actor", JSONValue, nullable=True),
    Column("detail", JSONValue, nullable=True),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Column("kid", String(32), nullable=True),
    Column("mac", String(64), nullable=True),
    Index(None, "action"),
    CheckConstraint(SHARD_RANGE, name="shard"),
)
"""One entry of the approvals audit log: number ``seq`` of ``shard``'s chain, chained to
the one before it by its hash.

``mac`` is an HMAC of the hash under the key named ``kid``, which the database never
holds; both are NULL for entries written before a key was configured.
"""

audit_head = Table(
    "audit_head",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
    CheckConstraint(SHARD_RANGE, name="shard"),
)
"""Each shard's last entry number and hash, so that removing entries from a chain's end
shows. There is one row per shard, written by the migrations: the rows and the check on
their numbers are how the schema records how many shards there are."""

outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(200), unique=True, nullable=False),
    Column("run_id", String(32), nullable=True),
    Column("kind", String(40), nullable=False),
    Column("data", JSONValue, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_at", UTCDateTime, nullable=False),
    Column("claimed_by", String(200), nullable=True),
    Column("claimed_until", UTCDateTime, nullable=True),
    Column("channel", String(40), nullable=True),
    Column("ts", String(40), nullable=True),
    Column("delivered_at", UTCDateTime, nullable=True),
    Column("last_error", Text, nullable=True),
    # Raised by every claim: only the holder of the current value may send or record.
    Column("fence", Integer, server_default=text("0"), nullable=False),
    # When the last send began, until its outcome is recorded: set means maybe sent.
    Column("sending_at", UTCDateTime, nullable=True),
    # The Slack workspace the notice goes to ('' in single-workspace mode: the only one).
    Column("team_id", String(40), server_default=text("''"), nullable=False),
    # The Enterprise Grid organization of that workspace ('' outside Grid).
    Column("enterprise_id", String(40), server_default=text("''"), nullable=False),
    Index(None, "status", "next_at"),
    Index(None, "run_id", "status"),
)
"""A notice waiting for delivery (to Slack), written with the change that caused it."""

seen_requests = Table(
    "seen_requests",
    metadata,
    Column("signature", String(80), primary_key=True),
    Column("seen_at", UTCDateTime, nullable=False),
    Column("work", JSONValue, nullable=True),
    Index(None, "seen_at"),
)
"""A signed Slack request already handled, kept while its signature could be replayed;
with the work it was acknowledged for (``work``) until that work is done."""

api_keys = Table(
    "api_keys",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("key_hash", String(64), unique=True, nullable=False),
    Column("webhook_secret", String(80), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
)
"""An API client: its name, the SHA-256 of its key, and the secret its webhooks are
signed with."""

api_approvals = Table(
    "api_approvals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("client", String(100), nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    # The hash of the tool and arguments asked, to refuse a key reused for another call.
    Column("request_hash", String(64), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("approval_id", String(24), nullable=True),
    Column("callback_url", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("client", "idempotency_key"),
    Index(None, "approval_id"),
)
"""An approval an API client asked for; its id is the approval's position in its run.

Archived and pruned with its run (so ``client`` has no foreign key: a run restored into
another database keeps it)."""

slack_installations = Table(
    "slack_installations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # '' outside Enterprise Grid.
    Column("enterprise_id", String(40), nullable=False),
    # '' for an organization-wide installation.
    Column("team_id", String(40), nullable=False),
    # The installation's fields as Slack answered them (tokens included).
    Column("data", JSONValue, nullable=False),
    Column("installed_at", UTCDateTime, nullable=False),
    UniqueConstraint("enterprise_id", "team_id"),
)
"""The app's installation in one Slack workspace (or a whole Grid organization): the
bot token Signoff uses there, and how to refresh it when it rotates."""

slack_oauth_states = Table(
    "slack_oauth_states",
    metadata,
    Column("state", String(80), primary_key=True),
    Column("expires_at", UTCDateTime, nullable=False),
)
"""A state handed to a browser starting an installation, good once until it expires."""

slack_home_tabs = Table(
    "slack_home_tabs",
    metadata,
    Column("workspace", String(40), primary_key=True),
    Column("user_id", String(40), primary_key=True),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("refreshes", Integer, server_default=text("0"), nullable=False),
    Column("refresh_due_at", UTCDateTime, nullable=True),
)
"""A person who has opened the app's Home tab in a workspace (their Grid organization, on
Grid): changes that concern them re-publish it. ``refreshes`` numbers their latest
refresh notice; ``refresh_due_at`` is when it was due (the next is spaced after it)."""

INDEXED_INPUT_PATHS = {"channel": "context.slack.channel", "requester": "requester.user_id"}
"""Strings of a run's input that lists of runs filter on (``/agent list``, ``/agent status``),
each indexed (``ix_runs_input_<name>``) newest first."""


def _add_expression_indexes() -> None:
    """Index the input paths lists of runs filter on."""
    for name, path in INDEXED_INPUT_PATHS.items():
        Index(f"ix_runs_input_{name}", ValueAt(runs.c.input, path), runs.c.created_at, runs.c.id)


_add_expression_indexes()
