"""The database schema: runs, their journal, failed attempts and delivered events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
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
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from agent_runtime.audit import AUDIT_SHARDS
from store.json_filters import ValueAt, item_at
from store.types import HexUuid, JSONValue, UTCDateTime

DUE_SET = text("next_due_at IS NOT NULL")
"""The rows of the approvals' due-time index: the pending ones."""

SHARD_RANGE = f"shard >= 0 AND shard < {AUDIT_SHARDS}"
"""The audit shards' numbers: the log has ``AUDIT_SHARDS`` chains."""

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base with the constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class RunRow(Base):
    """A run. ``due_at`` is when it next needs a worker: now if pending, its wake-up time if
    waiting, its lease expiry if running, NULL once finished."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(HexUuid, primary_key=True)
    workflow: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    input: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    output: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    error: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    wait_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    fence: Mapped[int] = mapped_column(Integer, default=0)
    forked_from: Mapped[str | None] = mapped_column(HexUuid, nullable=True)
    fork_at: Mapped[int | None] = mapped_column(Integer, nullable=True)

    __table_args__ = (
        Index(None, "due_at"),
        Index(None, "forked_from"),
        Index(None, "status", "created_at", "id"),
        Index(None, "created_at", "id"),
    )


class StepRow(Base):
    """One journal entry: the committed result of the step at ``position``."""

    __tablename__ = "steps"

    run_id: Mapped[str] = mapped_column(
        HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(Text)
    input_hash: Mapped[str] = mapped_column(String(16))
    output: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    error: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    attempts: Mapped[int] = mapped_column(SmallInteger)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AttemptRow(Base):
    """A failed attempt of a step."""

    __tablename__ = "attempts"

    run_id: Mapped[str] = mapped_column(
        HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    error: Mapped[Any] = mapped_column(JSONValue)
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class EventRow(Base):
    """An event delivered to a run; one per key."""

    __tablename__ = "events"

    run_id: Mapped[str] = mapped_column(
        HexUuid, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    data: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    delivered_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ApprovalRow(Base):
    """An approval: what was asked, under which policy, and who decided what."""

    __tablename__ = "approvals"

    id: Mapped[str] = mapped_column(String(24), primary_key=True)
    run_id: Mapped[str] = mapped_column(HexUuid, ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    tool: Mapped[str] = mapped_column(String(200))
    args: Mapped[Any] = mapped_column(JSONValue)
    args_hash: Mapped[str] = mapped_column(String(64))
    fingerprint: Mapped[str] = mapped_column(String(64))
    policy: Mapped[Any] = mapped_column(JSONValue)
    requester: Mapped[Any] = mapped_column(JSONValue)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deadline: Mapped[datetime] = mapped_column(UTCDateTime)
    reason_asked: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    votes: Mapped[Any] = mapped_column(JSONValue)
    decided_by: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    decided_args: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    decided_args_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    diff: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    escalated: Mapped[bool] = mapped_column(Boolean)
    remind_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """The earlier of deadline and reminder while pending, NULL once decided (the sweep's
    partial index)."""
    consumed_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    preview: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    """What the call would do, as shown to approvers (NULL: the tool declared no preview)."""
    preview_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    version: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        Index(None, "run_id"),
        Index(None, "status", "deadline"),
        Index(None, "status", "requested_at", "position", "id"),
        Index(None, "requested_at", "position", "id"),
        Index(None, "next_due_at", postgresql_where=DUE_SET, sqlite_where=DUE_SET),
    )


class GrantRow(Base):
    """A grant: calls of ``tool`` matching ``predicate`` that ``granted_by`` approved ahead of
    time, in the run ``run_id`` (scope ``run``) or in any run (scope ``day``), until
    ``expires_at`` or its revocation."""

    __tablename__ = "grants"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    tool: Mapped[str] = mapped_column(String(200))
    scope: Mapped[str] = mapped_column(String(8))
    run_id: Mapped[str] = mapped_column(HexUuid)
    source_approval: Mapped[str] = mapped_column(String(24))
    predicate: Mapped[Any] = mapped_column(JSONValue)
    granted_by: Mapped[Any] = mapped_column(JSONValue)
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_by: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (Index(None, "tool", "expires_at"), Index(None, "granted_at"))


class AuditRow(Base):
    """One entry of the approvals audit log: number ``seq`` of ``shard``'s chain, chained to
    the one before it by its hash.

    ``mac`` is an HMAC of the hash under the key named ``kid``, which the database never
    holds; both are NULL for entries written before a key was configured.
    """

    __tablename__ = "audit_log"

    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    approval_id: Mapped[str] = mapped_column(String(24))
    run_id: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(32))
    actor: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    detail: Mapped[Any] = mapped_column(JSONValue, nullable=True)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    kid: Mapped[str | None] = mapped_column(String(32), nullable=True)
    mac: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (Index(None, "action"), CheckConstraint(SHARD_RANGE, name="shard"))


class AuditHeadRow(Base):
    """Each shard's last entry number and hash, so that removing entries from a chain's end
    shows. There is one row per shard, written by the migrations: the rows and the check on
    their numbers are how the schema records how many shards there are."""

    __tablename__ = "audit_head"

    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(Integer)
    hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (CheckConstraint(SHARD_RANGE, name="shard"),)


class OutboxRow(Base):
    """A notice waiting for delivery (to Slack), written with the change that caused it."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    kind: Mapped[str] = mapped_column(String(40))
    data: Mapped[Any] = mapped_column(JSONValue)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    channel: Mapped[str | None] = mapped_column(String(40), nullable=True)
    ts: Mapped[str | None] = mapped_column(String(40), nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    fence: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    """Raised by every claim: only the holder of the current value may send or record."""
    sending_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When the last send began, until its outcome is recorded: set means maybe sent."""
    team_id: Mapped[str] = mapped_column(String(40), server_default=text("''"))
    """The Slack workspace the notice goes to ('' in single-workspace mode: the only one)."""
    enterprise_id: Mapped[str] = mapped_column(String(40), server_default=text("''"))
    """The Enterprise Grid organization of that workspace ('' outside Grid)."""

    __table_args__ = (
        Index(None, "status", "next_at"),
        Index(None, "run_id", "status"),
    )


class SeenRequestRow(Base):
    """A signed Slack request already handled, kept while its signature could be replayed;
    with the work it was acknowledged for (``work``) until that work is done."""

    __tablename__ = "seen_requests"

    signature: Mapped[str] = mapped_column(String(80), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    work: Mapped[Any] = mapped_column(JSONValue, nullable=True)

    __table_args__ = (
        Index(None, "seen_at"),
        Index(
            "ix_seen_requests_unfinished",
            "seen_at",
            postgresql_where=text("work IS NOT NULL"),
            sqlite_where=text("work IS NOT NULL"),
        ),
    )


class ApiKeyRow(Base):
    """An API client: its name, the SHA-256 of its key, and the secret its webhooks are
    signed with."""

    __tablename__ = "api_keys"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    webhook_secret: Mapped[str] = mapped_column(String(80))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ApiApprovalRow(Base):
    """An approval an API client asked for; its id is the approval's position in its run.

    Archived and pruned with its run (so ``client`` has no foreign key: a run restored into
    another database keeps it)."""

    __tablename__ = "api_approvals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    client: Mapped[str] = mapped_column(String(100))
    idempotency_key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    """The hash of the tool and arguments asked, to refuse a key reused for another call."""
    run_id: Mapped[str] = mapped_column(String(32))
    approval_id: Mapped[str | None] = mapped_column(String(24), nullable=True)
    callback_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        UniqueConstraint("client", "idempotency_key"),
        Index(None, "approval_id"),
    )


class SlackInstallationRow(Base):
    """The app's installation in one Slack workspace (or a whole Grid organization): the
    bot token Signoff uses there, and how to refresh it when it rotates."""

    __tablename__ = "slack_installations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    enterprise_id: Mapped[str] = mapped_column(String(40))
    """'' outside Enterprise Grid."""
    team_id: Mapped[str] = mapped_column(String(40))
    """'' for an organization-wide installation."""
    data: Mapped[Any] = mapped_column(JSONValue)
    """The installation's fields as Slack answered them (tokens included)."""
    installed_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (UniqueConstraint("enterprise_id", "team_id"),)


class SlackOAuthStateRow(Base):
    """A state handed to a browser starting an installation, good once until it expires."""

    __tablename__ = "slack_oauth_states"

    state: Mapped[str] = mapped_column(String(80), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SlackHomeTabRow(Base):
    """A person who has opened the app's Home tab in a workspace (their Grid organization, on
    Grid): changes that concern them re-publish it. ``refreshes`` numbers their latest
    refresh notice; ``refresh_due_at`` is when it was due (the next is spaced after it)."""

    __tablename__ = "slack_home_tabs"

    workspace: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime)
    refreshes: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    refresh_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


runs: Table = Base.metadata.tables["runs"]
steps: Table = Base.metadata.tables["steps"]
attempts: Table = Base.metadata.tables["attempts"]
events: Table = Base.metadata.tables["events"]
approvals: Table = Base.metadata.tables["approvals"]
grants: Table = Base.metadata.tables["grants"]
audit_log: Table = Base.metadata.tables["audit_log"]
audit_head: Table = Base.metadata.tables["audit_head"]
outbox: Table = Base.metadata.tables["outbox"]
seen_requests: Table = Base.metadata.tables["seen_requests"]
api_keys: Table = Base.metadata.tables["api_keys"]
api_approvals: Table = Base.metadata.tables["api_approvals"]
slack_installations: Table = Base.metadata.tables["slack_installations"]
slack_oauth_states: Table = Base.metadata.tables["slack_oauth_states"]
slack_home_tabs: Table = Base.metadata.tables["slack_home_tabs"]

INDEXED_INPUT_PATHS = {"channel": "context.slack.channel", "requester": "requester.user_id"}
"""Strings of a run's input that lists of runs filter on (``/agent list``, ``/agent status``),
each indexed (``ix_runs_input_<name>``) newest first."""

APPROVER_KEYS = ("approvers", "escalate_to")
"""The lists of people in an approval's policy who may decide it (``/agent pending``)."""


def _add_expression_indexes() -> None:
    """Index the input paths lists of runs filter on, and (on PostgreSQL) the approvers of
    approvals, written through at once: a list of pending entries would be read in full by
    every search."""
    for name, path in INDEXED_INPUT_PATHS.items():
        Index(f"ix_runs_input_{name}", ValueAt(runs.c.input, path), runs.c.created_at, runs.c.id)
    for key in APPROVER_KEYS:
        Index(
            f"ix_approvals_policy_{key}",
            item_at(approvals.c.policy, key),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ).ddl_if(dialect="postgresql")


_add_expression_indexes()
