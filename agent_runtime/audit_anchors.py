"""Anchors: the audit chain's head copied outside the database, one JSON line at a time.

An anchor records an entry's number, its chained hash and (when the entry was signed) its
key id and MAC. As long as every anchored entry is still in the log unchanged, nothing up to
the last anchor was rewritten, reordered, removed or stripped of its MAC; checking that
needs no key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.audit import GENESIS, AuditEntry
from agent_runtime.audit_keys import AuditKeys


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """The (seq, hash) of an audit entry as it stood at ``at``, with its MAC if it had one."""

    seq: int
    hash: str
    at: datetime
    kid: str | None = None
    mac: str | None = None

    def to_line(self) -> str:
        """Return the anchor as one line of JSON (no newline)."""
        data: dict[str, Any] = {"seq": self.seq, "hash": self.hash, "at": self.at.isoformat()}
        if self.mac is not None:
            data |= {"kid": self.kid, "mac": self.mac}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_line(cls, line: str) -> Anchor:
        """Parse a line written by ``to_line``; raise ValueError if it is not one."""
        try:
            data = json.loads(line)
            anchor = cls(
                seq=data["seq"],
                hash=data["hash"],
                at=datetime.fromisoformat(data["at"]),
                kid=data.get("kid"),
                mac=data.get("mac"),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an anchor: {exc}") from None
        if not isinstance(anchor.seq, int) or not isinstance(anchor.hash, str):
            raise ValueError("not an anchor: seq or hash of the wrong type")
        return anchor


def anchor_of(last: AuditEntry | None, at: datetime) -> Anchor:
    """Return the anchor of the log whose last entry is ``last`` (None: the empty log)."""
    if last is None:
        return Anchor(seq=0, hash=GENESIS, at=at)
    return Anchor(seq=last.seq, hash=last.hash, at=at, kid=last.kid, mac=last.mac)


def parse_anchors(lines: Iterable[str]) -> tuple[list[tuple[int, Anchor]], list[str]]:
    """Return the anchors with their line numbers, and a problem for each unreadable line."""
    anchors: list[tuple[int, Anchor]] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            anchors.append((number, Anchor.from_line(line)))
        except ValueError:
            problems.append(f"anchor line {number} is not an anchor")
    return anchors, problems


def first_signed_anchor(anchors: Sequence[tuple[int, Anchor]]) -> int | None:
    """Return the lowest entry number anchored with a MAC, if any."""
    return min((a.seq for _, a in anchors if a.mac is not None), default=None)


def check_anchors(
    entries: Sequence[AuditEntry], anchors: Sequence[tuple[int, Anchor]], keys: AuditKeys | None
) -> list[str]:
    """Return a problem for every anchor that (with keys) is forged, or that the log no longer
    matches."""
    by_seq = {entry.seq: entry for entry in entries}
    problems: list[str] = []
    for number, anchor in anchors:
        problem = _forged(anchor, keys) or _mismatch(anchor, by_seq.get(anchor.seq))
        if problem:
            problems.append(f"anchor line {number}: {problem}")
    return problems


def _mismatch(anchor: Anchor, entry: AuditEntry | None) -> str | None:
    if anchor.seq == 0:
        return None if anchor.hash == GENESIS else "entry 0 is not the start of a log"
    if entry is None:
        return f"entry {anchor.seq} is missing from the log (deleted, or the log truncated)"
    if entry.hash != anchor.hash:
        return f"entry {anchor.seq} no longer has the anchored hash (the log was rewritten)"
    if (entry.kid, entry.mac) != (anchor.kid, anchor.mac):
        return f"entry {anchor.seq} no longer has the anchored MAC"
    return None


def _forged(anchor: Anchor, keys: AuditKeys | None) -> str | None:
    if keys is None or anchor.mac is None or anchor.kid is None:
        return None
    verdict = keys.check(anchor.seq, anchor.hash, anchor.kid, anchor.mac)
    if verdict is None:
        return f"signed with unknown key id {anchor.kid!r}"
    return None if verdict else "its MAC does not verify (the anchor file was edited)"
