"""The approvals audit log: append-only, each entry chained to the one before by its hash."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.audit_keys import AuditKeys
from agent_runtime.serialization import canonical_json

GENESIS = "0" * 64
"""The ``prev_hash`` of the first entry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditDraft:
    """An audit entry before the store places it in the chain."""

    at: datetime
    approval_id: str
    run_id: str
    action: str
    actor: dict[str, Any] | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """A chained audit entry; ``kid`` and ``mac`` authenticate its hash when it was signed."""

    seq: int
    at: datetime
    approval_id: str
    run_id: str
    action: str
    actor: dict[str, Any] | None
    detail: dict[str, Any] | None
    prev_hash: str
    hash: str
    kid: str | None = None
    mac: str | None = None


def chain(draft: AuditDraft, seq: int, prev_hash: str, keys: AuditKeys | None = None) -> AuditEntry:
    """Return ``draft`` as entry number ``seq`` following the entry whose hash is ``prev_hash``,
    signed with the first of ``keys`` when there are keys."""
    fields = dict(
        seq=seq,
        at=draft.at,
        approval_id=draft.approval_id,
        run_id=draft.run_id,
        action=draft.action,
        actor=draft.actor,
        detail=draft.detail,
    )
    digest = entry_hash(prev_hash, fields)
    kid, mac = keys.sign(seq, digest) if keys is not None else (None, None)
    return AuditEntry(
        seq=seq,
        at=draft.at,
        approval_id=draft.approval_id,
        run_id=draft.run_id,
        action=draft.action,
        actor=draft.actor,
        detail=draft.detail,
        prev_hash=prev_hash,
        hash=digest,
        kid=kid,
        mac=mac,
    )


def entry_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    """Return the SHA-256 of an entry's fields, chained to the previous entry's hash."""
    content = {**fields, "at": fields["at"].isoformat()}
    return hashlib.sha256((prev_hash + canonical_json(content)).encode()).hexdigest()


def verify(entries: list[AuditEntry], head: tuple[int, str] | None) -> list[str]:
    """Return every break in the chain (edited, deleted or reordered entries); empty if sound.

    ``head`` is the (seq, hash) of the last entry as the store recorded it on each append,
    so that removing entries from the end is detected too.
    """
    problems: list[str] = []
    prev_hash, expected_seq = GENESIS, 1
    for entry in entries:
        if entry.seq != expected_seq:
            problems.append(f"entry {expected_seq} is missing (next is {entry.seq})")
        if entry.prev_hash != prev_hash:
            problems.append(f"entry {entry.seq} does not follow the entry before it")
        fields = dict(
            seq=entry.seq,
            at=entry.at,
            approval_id=entry.approval_id,
            run_id=entry.run_id,
            action=entry.action,
            actor=entry.actor,
            detail=entry.detail,
        )
        if entry_hash(entry.prev_hash, fields) != entry.hash:
            problems.append(f"entry {entry.seq} was altered after it was written")
        prev_hash, expected_seq = entry.hash, entry.seq + 1
    if head is not None and head != (expected_seq - 1, prev_hash):
        problems.append(f"the log ends at entry {expected_seq - 1} but its head is entry {head[0]}")
    return problems
