"""Everything ``signoff audit verify`` checks: the chain, the entries' MACs and the anchors.

The rule for unsigned entries: signing begins at the first entry that carries a MAC, or
at the first entry an anchor recorded with a MAC, whichever comes first. Entries before
it were written before any key was configured; they stay valid (the MAC of the first
signed entry covers them through the chain) and are counted as unsigned. An unsigned entry
after it is a problem: the app signs every entry once it has a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_runtime.audit import AuditEntry, verify
from agent_runtime.audit_anchors import Anchor, check_anchors, first_signed_anchor, parse_anchors
from agent_runtime.audit_keys import AuditKeys

REWRITTEN = "its MAC does not verify (rewritten, or its MAC copied from another entry)"


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """The outcome of checking the audit log; ``ok`` when there is no problem."""

    entries: int
    problems: list[str]
    signed_from: int | None
    """The entry at which signing began, or None if no entry was ever signed."""
    unsigned: int
    """Entries written before signing began (not problems)."""
    macs_verified: bool
    anchors: int | None
    """How many anchors were checked, or None when no anchor file was given."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def examine(
    entries: Sequence[AuditEntry],
    head: tuple[int, str] | None,
    *,
    keys: AuditKeys | None = None,
    anchor_lines: Sequence[str] | None = None,
) -> AuditReport:
    """Check the chain and head, every entry's MAC (with ``keys``) and every anchor (the
    lines of an anchor file)."""
    anchors, unreadable = parse_anchors(anchor_lines or ())
    signed_from = _signing_began(entries, anchors)
    problems = [
        *verify(list(entries), head),
        *_signature_problems(entries, keys, signed_from),
        *unreadable,
        *check_anchors(entries, anchors, keys),
    ]
    unsigned = sum(
        1 for e in entries if not _signed(e) and (signed_from is None or e.seq < signed_from)
    )
    return AuditReport(
        entries=len(entries),
        problems=problems,
        signed_from=signed_from,
        unsigned=unsigned,
        macs_verified=keys is not None,
        anchors=None if anchor_lines is None else len(anchors),
    )


def _signing_began(
    entries: Sequence[AuditEntry], anchors: Sequence[tuple[int, Anchor]]
) -> int | None:
    first = next((e.seq for e in entries if _signed(e)), None)
    starts = [seq for seq in (first, first_signed_anchor(anchors)) if seq is not None]
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
