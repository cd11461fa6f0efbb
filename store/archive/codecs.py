"""The document's values: how each column's values become JSON and back, row by row."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, String, Table

from store.types import HexUuid, JsonDocument, UTCDateTime


def decode_row(table: Table, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"a row of {table.name!r} must be an object")
    codecs = _codecs(table)
    if unknown := sorted(set(value) - set(codecs)):
        raise ValueError(
            f"{table.name} has no column {unknown[0]!r} here"
            " (run `signoff db upgrade`, or use a newer Signoff)"
        )
    if missing := [c.name for c in table.columns if _required(c) and c.name not in value]:
        raise ValueError(f"a row of {table.name!r} lacks {missing[0]!r}")
    return {name: _decode_value(table.c[name], codecs[name], item) for name, item in value.items()}


def _decode_value(column: Column[Any], codec: _Codec, value: Any) -> Any:
    where = f"{column.table.name}.{column.name}"
    if value is None:
        if not column.nullable:
            raise ValueError(f"{where} must not be null")
        return None
    try:
        return codec.decode(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def _required(column: Column[Any]) -> bool:
    return not column.nullable and column.default is None and column.server_default is None


def encode_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    codecs = _codecs(table)
    return {
        name: None if value is None else codecs[name].encode(value) for name, value in row.items()
    }


@dataclass(frozen=True, slots=True)
class _Codec:
    """How a column's values become JSON and back (``decode`` checks the value's shape)."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


@functools.cache
def _codecs(table: Table) -> dict[str, _Codec]:
    return {column.name: _codec(column) for column in table.columns}


def _codec(column: Column[Any]) -> _Codec:
    kind = column.type
    if isinstance(kind, JsonDocument | JSON):
        return _Codec(_same, _same)
    if isinstance(kind, HexUuid):
        return _Codec(_same, _hex)
    if isinstance(kind, UTCDateTime):
        return _Codec(_iso, _aware_datetime)
    if isinstance(kind, DateTime):
        return _Codec(_iso, datetime.fromisoformat)
    if isinstance(kind, Boolean):
        return _Codec(_same, _of(bool))
    if isinstance(kind, Integer):
        return _Codec(_same, _integer)
    if isinstance(kind, Float):
        return _Codec(_same, _number)
    if isinstance(kind, String):
        return _Codec(_same, _of(str))
    return _Codec(_plain, _same)


def _same(value: Any) -> Any:
    return value


def _plain(value: Any) -> Any:
    """A value of another column type, if JSON holds it exactly."""
    if isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"cannot archive a {type(value).__name__} value")


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _aware_datetime(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_of(str)(value))
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset")
    return parsed


def _hex(value: Any) -> str:
    if not isinstance(value, str) or uuid.UUID(hex=value).hex != value:
        raise ValueError(f"{value!r} is not 32 lowercase hex digits")
    return value


def _integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    return value


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    return value


def _of(kind: type[Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise ValueError(f"{value!r} is not a {kind.__name__}")
        return value

    return check
