"""Checks on a row found by its key, written so that PostgreSQL never searches by them.

A statement that finds a row by its key and checks its status (``id = :id AND status =
'running'``) gives PostgreSQL two ways in: the key's unique index, or an index that leads
with the status (the lists' and the claims' indexes). The planner chooses by statistics,
and statistics lag behind tables whose statuses move fast: taken when few notices were
pending or few runs waiting, they make the status's index look as cheap as the key's, and
the statement then reads every row of that status to find its one. That cost grows with
the backlog, exactly while a backlog drains (Slack down for a while, a burst of clicks,
thousands of runs waiting): each delivery of a notice, each decision, each wake-up reads
the whole backlog.

``row_has`` writes the check as ``IS NOT DISTINCT FROM``: on a column that is never NULL
it is the same test as ``=``, and no index answers it, so the key's index is the only
way in. Searches by status (lists, claims, sweeps) keep ``=``, which their indexes serve.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, or_

ROW_HAS_SQL = "IS NOT DISTINCT FROM"
"""The operator of ``row_has``, for statements written as SQL text."""


def row_has(column: ColumnElement[Any], value: Any) -> ColumnElement[bool]:
    """``column = value`` on a row already found by its key: checked, never searched by."""
    return column.is_not_distinct_from(value)


def row_has_one_of(column: ColumnElement[Any], values: Iterable[Any]) -> ColumnElement[bool]:
    """``column IN values`` on a row already found by its key (as ``row_has``)."""
    return or_(*(row_has(column, value) for value in values))


__all__ = ["ROW_HAS_SQL", "row_has", "row_has_one_of"]
