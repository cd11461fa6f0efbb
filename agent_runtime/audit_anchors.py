"""Anchors: the audit chains' heads copied outside the database, one JSON line at a time.

An anchor line records, for every shard whose chain has entries, the newest entry's number,
its chained hash and (when the entry was signed) its key id and MAC: every head in one line,
so one line pins the whole log as it stood, and a problem names the shard it is in. As long
as every anchored entry is still in its chain unchanged, nothing up to the last anchor was
rewritten, reordered, removed or stripped of its MAC; checking that needs no key.

A line written before there were shards (``{"seq", "hash", "at", ...}``) anchors shard 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.audit import AuditEntry, genesis
from agent_runtime.audit_keys import AuditKeys


@dataclass(frozen=True, slots=True, kw_only=True)
class AnchoredHead:
    """The (seq, hash) of a shard's newest entry, with its MAC if it had one."""

    shard: int
    seq: int
    hash: str
    kid: str | None = None
    mac: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The head as its anchor line holds it."""
        data: dict[str, Any] = {"shard": self.shard, "seq": self.seq, "hash": self.hash}
        if self.mac is not None:
            data |= {"kid": self.kid, "mac": self.mac}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], shard: int = 0) -> AnchoredHead:
        """Parse what ``to_json`` wrote (``shard`` when the data names none); raise ValueError
        if it is not a head."""
        head = cls(
            shard=data.get("shard", shard),
            seq=data["seq"],
            hash=data["hash"],
            kid=data.get("kid"),
            mac=data.get("mac"),
        )
        if not all(isinstance(n, int) for n in (head.shard, head.seq)):
            raise ValueError("not an anchor: shard or seq of the wrong type")
        if not isinstance(head.hash, str):
            raise ValueError("not an anchor: hash of the wrong type")
        return head


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """Every non-empty chain's head as it stood at ``at``."""

    at: datetime
    heads: tuple[AnchoredHead, ...]

    @property
    def entries(self) -> int:
        """How many entries the anchored log had."""
        return sum(head.seq for head in self.heads)

    def to_line(self) -> str:
        """Return the anchor as one line of JSON (no newline)."""
        data = {"at": self.at.isoformat(), "heads": [head.to_json() for head in self.heads]}
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_line(cls, line: str) -> Anchor:
        """Parse a line written by ``to_line`` (or before there were shards); raise ValueError
        if it is not one."""
        try:
            data = json.loads(line)
            at = datetime.fromisoformat(data["at"])
            if "heads" not in data:
                return cls(at=at, heads=(AnchoredHead.from_json(data),))
            return cls(at=at, heads=tuple(AnchoredHead.from_json(h) for h in data["heads"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an anchor: {exc}") from None


def anchor_of(newest: Sequence[AuditEntry], at: datetime) -> Anchor:
    """Return the anchor of the log whose chains' newest entries are ``newest``."""
    heads = (
        AnchoredHead(shard=e.shard, seq=e.seq, hash=e.hash, kid=e.kid, mac=e.mac)
        for e in sorted(newest, key=lambda e: e.shard)
    )
    return Anchor(at=at, heads=tuple(heads))


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


def heads_of(anchors: Sequence[tuple[int, Anchor]], shard: int) -> list[tuple[int, AnchoredHead]]:
    """Return ``shard``'s anchored heads with the numbers of their lines."""
    return [(n, h) for n, anchor in anchors for h in anchor.heads if h.shard == shard]


def first_signed_anchor(heads: Sequence[tuple[int, AnchoredHead]]) -> int | None:
    """Return the lowest entry number anchored with a MAC, if any."""
    return min((h.seq for _, h in heads if h.mac is not None), default=None)


def check_anchors(
    entries: Sequence[AuditEntry],
    heads: Sequence[tuple[int, AnchoredHead]],
    keys: AuditKeys | None,
) -> list[str]:
    """Return a problem for every anchored head of one chain that (with keys) is forged, or
    that the chain's ``entries`` no longer match."""
    by_seq = {entry.seq: entry for entry in entries}
    problems: list[str] = []
    for number, head in heads:
        problem = _forged(head, keys) or _mismatch(head, by_seq.get(head.seq))
        if problem:
            problems.append(f"anchor line {number}: {problem}")
    return problems


def _mismatch(head: AnchoredHead, entry: AuditEntry | None) -> str | None:
    if head.seq == 0:
        return None if head.hash == genesis(head.shard) else "entry 0 is not the start of a log"
    if entry is None:
        return f"entry {head.seq} is missing from the log (deleted, or the log truncated)"
    if entry.hash != head.hash:
        return f"entry {head.seq} no longer has the anchored hash (the log was rewritten)"
    if (entry.kid, entry.mac) != (head.kid, head.mac):
        return f"entry {head.seq} no longer has the anchored MAC"
    return None


def _forged(head: AnchoredHead, keys: AuditKeys | None) -> str | None:
    if keys is None or head.mac is None or head.kid is None:
        return None
    verdict = keys.check(head.seq, head.hash, head.kid, head.mac)
    if verdict is None:
        return f"signed with unknown key id {head.kid!r}"
    return None if verdict else "its MAC does not verify (the anchor file was edited)"
