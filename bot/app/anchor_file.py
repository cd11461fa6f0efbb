"""The audit anchor file: append-only JSON lines, kept outside the database."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from agent_runtime.audit_anchors import Anchor, anchor_of
from agent_runtime.store import ApprovalStore

TAIL_BYTES = 16384
"""How much of the file's end is read to find its last anchor (a line of 16 signed heads is
~3,500 bytes)."""


def append_anchor(path: str, anchor: Anchor) -> None:
    """Append ``anchor`` as one line, in one write, and flush it to disk."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (anchor.to_line() + "\n").encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def anchor_now(store: ApprovalStore, path: str, now: datetime) -> Anchor:
    """Append the anchor of the chains' newest entries to ``path`` and return it."""
    anchor = anchor_of(store.newest_audit_entries(), now)
    append_anchor(path, anchor)
    return anchor


def anchor_if_changed(store: ApprovalStore, path: str, now: datetime) -> Anchor | None:
    """Append the log's anchor unless the file's last line already anchors the same heads."""
    anchor = anchor_of(store.newest_audit_entries(), now)
    last = last_anchor(path)
    if last is not None and last.heads == anchor.heads:
        return None
    append_anchor(path, anchor)
    return anchor


def last_anchor(path: str) -> Anchor | None:
    """Return the file's last anchor, or None if the file is missing, empty or ends badly."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - TAIL_BYTES))
            tail = file.read().decode(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return None
    try:
        return Anchor.from_line(tail[-1]) if tail else None
    except ValueError:
        return None


def read_lines(path: str) -> list[str]:
    """Return the file's lines."""
    return Path(path).read_text(encoding="utf-8").splitlines()
