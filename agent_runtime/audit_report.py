"""Everything ``signoff audit verify`` checks: every shard's chain and head, the entries' MACs
and the anchors.

The rule for unsigned entries, chain by chain: signing begins at the chain's first entry
that carries a MAC, or at the first of its entries an anchor recorded with a MAC, whichever
comes first. Entries before it were written before any key was configured; they stay valid
(the MAC of the first signed entry covers them through the chain) and are counted as
unsigned. An unsigned entry after it is a problem: the app signs every entry once it has a
key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_runtime.audit import AUDIT_SHARDS, AuditEntry, verify
from agent_runtime.audit_anchors import (
    Anchor,
    AnchoredHead,
    check_anchors,
    first_signed_anchor,
    heads_of,
    parse_anchors,
)
from agent_runtime.audit_keys import AuditKeys

REWRITTEN = "its MAC does not verify (rewritten, or its MAC copied from another entry)"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainReport:
    """The outcome of checking one shard's chain; ``ok`` when it has no problem."""

    shard: int
    entries: int
    head: int | None
    """The entry number its head row records, or None when the row is missing."""
    problems: list[str]
    signed_from: int | None
    """The entry at which signing began, or None if no entry was ever signed."""
    unsigned: int
    """Entries written before signing began (not problems)."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong with this chain."""
        return not self.problems


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """The outcome of checking the audit log; ``ok`` when there is no problem."""

    chains: list[ChainReport]
    problems: list[str]
    """Every chain's problems, each prefixed with its shard, then the log's own."""
    macs_verified: bool
    anchors: int | None
    """How many anchors were checked, or None when no anchor file was given."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    @property
    def entries(self) -> int:
        """How many entries the chains hold."""
        return sum(chain.entries for chain in self.chains)

    @property
    def unsigned(self) -> int:
        """Entries written before signing began, over every chain."""
        return sum(chain.unsigned for chain in self.chains)


def examine(
    entries: Sequence[AuditEntry],
    heads: Mapping[int, tuple[int, str]],
    *,
    keys: AuditKeys | None = None,
    anchor_lines: Sequence[str] | None = None,
) -> AuditReport:
    """Check every shard's chain against its head, every entry's MAC (with ``keys``) and
    every anchor (the lines of an anchor file)."""
    anchors, unreadable = parse_anchors(anchor_lines or ())
    chains = [
        _examine_chain(shard, entries, heads.get(shard), keys, anchors)
        for shard in range(AUDIT_SHARDS)
    ]
    strays = sorted(
        {e.shard for e in entries} | set(heads) | {h.shard for _, a in anchors for h in a.heads}
    )
    problems = [f"shard {c.shard}: {p}" for c in chains for p in c.problems]
    problems += [
        f"shard {shard} is not one of the log's {AUDIT_SHARDS} shards"
        for shard in strays
        if not 0 <= shard < AUDIT_SHARDS
    ]
    return AuditReport(
        chains=chains,
        problems=problems + unreadable,
        macs_verified=keys is not None,
        anchors=None if anchor_lines is None else len(anchors),
    )


def _examine_chain(
    shard: int,
    log: Sequence[AuditEntry],
    head: tuple[int, str] | None,
    keys: AuditKeys | None,
    anchors: Sequence[tuple[int, Anchor]],
) -> ChainReport:
    entries = [e for e in log if e.shard == shard]
    anchored = heads_of(anchors, shard)
    signed_from = _signing_began(entries, anchored)
    missing_head = ["its head row is missing (the log was truncated)"] if head is None else []
    problems = [
        *missing_head,
        *verify(entries, head, shard),
        *_signature_problems(entries, keys, signed_from),
        *check_anchors(entries, anchored, keys),
    ]
    return ChainReport(
        shard=shard,
        entries=len(entries),
        head=None if head is None else head[0],
        problems=problems,
        signed_from=signed_from,
        unsigned=sum(
            1 for e in entries if not _signed(e) and (signed_from is None or e.seq < signed_from)
        ),
    )


def _signing_began(
    entries: Sequence[AuditEntry], anchored: Sequence[tuple[int, AnchoredHead]]
) -> int | None:
    first = next((e.seq for e in entries if _signed(e)), None)
    starts = [seq for seq in (first, first_signed_anchor(anchored)) if seq is not None]
    return min(starts, default=None)


def _signed(entry: AuditEntry) -> bool:
    return entry.mac is not None and entry.kid is not None


def _signature_problems(
    entries: Sequence[AuditEntry], keys: AuditKeys | None, signed_from: int | None
) -> list[str]:
    problems = []
    for entry in entries:
        problem = _signature_problem(entry, keys, signed_from)
        if problem:
            problems.append(f"entry {entry.seq}: {problem}")
    return problems


def _signature_problem(
    entry: AuditEntry, keys: AuditKeys | None, signed_from: int | None
) -> str | None:
    if entry.mac is None or entry.kid is None:  # spelt out for the type checker
        if signed_from is not None and entry.seq >= signed_from:
            return f"unsigned, though signing began at entry {signed_from}"
        return None
    if keys is None:
        return None
    verdict = keys.check(entry.seq, entry.hash, entry.kid, entry.mac)
    if verdict is None:
        return f"signed with unknown key id {entry.kid!r}"
    return None if verdict else REWRITTEN
