"""Previews: what a call would do, in words a person checks, bound to the decision by digest.

A tool may declare ``preview(args) -> Preview`` ("Refund 49.99 USD to Dana Example for order
1042"). The preview is computed when the approval is asked and shown first on the card; its
digest is stored beside the arguments' hash. Just before the call runs the preview is
computed again: if its digest differs from the one the approver saw, the call does not run
and the approval is asked again with the new preview. A preview reads live data, so it may
fail; a failed preview has no digest, so a call is never run on a preview nobody saw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_runtime.serialization import canonical_json

TABLE_ROWS = 10
"""The most rows a preview's table may have (a Slack section shows ten fields)."""
TEXT_LIMIT = 2000
"""The most characters of a preview's text, and of each label and value of its table."""
ERROR_LIMIT = 500
"""The most characters kept of why a preview could not be computed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """What a call would do: a sentence and/or a small table of labelled values."""

    text: str = ""
    table: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a preview's text is a string, not {type(self.text).__name__}")
        object.__setattr__(self, "table", _rows(self.table))
        if not self.text and not self.table:
            raise ValueError("a preview needs a text or a table")
        if len(self.table) > TABLE_ROWS:
            raise ValueError(f"a preview's table has at most {TABLE_ROWS} rows")
        pieces = [self.text, *(cell for row in self.table for cell in row)]
        if any(len(piece) > TEXT_LIMIT for piece in pieces):
            raise ValueError(f"a preview's text and cells have at most {TEXT_LIMIT} characters")

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form (what is stored with the approval and hashed)."""
        return {"text": self.text, "table": [[label, value] for label, value in self.table]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Preview:
        """Read the JSON form."""
        rows = tuple((str(label), str(value)) for label, value in data.get("table") or ())
        return cls(text=str(data.get("text") or ""), table=rows)

    @property
    def digest(self) -> str:
        """The SHA-256 of the canonical JSON form: what binds a decision to this preview."""
        return hashlib.sha256(canonical_json(self.to_json(), what="preview").encode()).hexdigest()


def _rows(table: Any) -> tuple[tuple[str, str], ...]:
    """A preview's table as pairs of text: a number is written as text (49.99 as "49.99");
    anything else but text is refused."""
    rows = []
    for row in table:
        if isinstance(row, str | bytes) or len(row) != 2:
            raise TypeError(f"a preview's table holds (label, value) pairs, not {row!r}")
        cells = []
        for cell in row:
            if isinstance(cell, int | float) and not isinstance(cell, bool):
                cell = str(cell)
            if not isinstance(cell, str):
                raise TypeError(f"a preview's table holds text (or numbers), not {cell!r}")
            cells.append(cell)
        rows.append((cells[0], cells[1]))
    return tuple(rows)


PreviewFn = Callable[[dict[str, Any]], Preview]
"""Given a call's arguments, return what the call would do (may read live data, may fail)."""


@dataclass(frozen=True, slots=True)
class Shown:
    """A computed preview, or why it could not be computed."""

    preview: Preview | None
    error: str | None = None

    @property
    def digest(self) -> str | None:
        """The preview's digest; None when it failed (so it matches no computed preview)."""
        return None if self.preview is None else self.preview.digest

    def to_json(self) -> dict[str, Any]:
        """Return what the approval stores: the preview's JSON, or ``{"error": ...}``."""
        return {"error": self.error} if self.preview is None else self.preview.to_json()


def compute(fn: PreviewFn, args: dict[str, Any]) -> Shown:
    """Run a tool's preview for ``args``; any failure is kept as the error, never raised."""
    try:
        found = fn(dict(args))
    except Exception as exc:  # a preview reads live data: whatever fails is reported
        return Shown(None, _cut(f"{type(exc).__name__}: {exc}"))
    if not isinstance(found, Preview):
        return Shown(None, f"the preview returned {type(found).__name__}, not a Preview")
    return Shown(found)


def stored(data: dict[str, Any] | None) -> Preview | None:
    """The preview an approval stored, or None (none asked, or it failed)."""
    if not data or "error" in data:
        return None
    return Preview.from_json(data)


def stored_error(data: dict[str, Any] | None) -> str | None:
    """Why the preview an approval stored could not be computed (None if it was, or none)."""
    return None if not data else data.get("error")


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"
