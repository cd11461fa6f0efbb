"""Typed identifiers."""

from __future__ import annotations

import uuid
from typing import NewType

RunId = NewType("RunId", str)
"""A run's id: 32 lowercase hex digits."""


def new_run_id() -> RunId:
    """Return a fresh random run id."""
    return RunId(uuid.uuid4().hex)


def parse_run_id(text: str) -> RunId:
    """Return ``text`` as a RunId, accepting the dashed UUID form; raise ValueError otherwise."""
    return RunId(uuid.UUID(text.strip()).hex)
