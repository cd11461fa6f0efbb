"""Lists a page at a time, newest (or oldest) first: the next page starts after the last row
shown.

A page is the rows that sort after a given row (keyset), never the rows past an OFFSET: the
database walks the list's index from that row on, so the thousandth page costs what the
first does, and a row added meanwhile neither repeats nor hides one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, bindparam, tuple_


def newest_first(query: Select[Any], order: Sequence[Any]) -> Select[Any]:
    """Order ``query`` by ``order`` (columns that identify a row), greatest first."""
    return query.order_by(*(column.desc() for column in order))


def oldest_first(query: Select[Any], order: Sequence[Any]) -> Select[Any]:
    """Order ``query`` by ``order`` (columns that identify a row), least first."""
    return query.order_by(*(column.asc() for column in order))


def after(
    order: Sequence[Any], values: Sequence[Any], *, ascending: bool = False
) -> ColumnElement[bool]:
    """Rows that come after the row whose ``order`` columns hold ``values``, greatest first
    (least first if ``ascending``)."""
    bound = tuple_(
        *(
            bindparam(None, value, type_=column.type)
            for column, value in zip(order, values, strict=True)
        )
    )
    return tuple_(*order) > bound if ascending else tuple_(*order) < bound
