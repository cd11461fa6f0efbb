"""Column types that read back the same on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, Uuid
from sqlalchemy.types import TypeDecorator, TypeEngine

from store.dialects import dialect as dialect_package


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp; SQLite's naive values are read back as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Store in UTC (naive on SQLite, where the column has no zone)."""
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class HexUuid(TypeDecorator[str]):
    """A UUID given and returned as 32 hex digits; native ``uuid`` on PostgreSQL."""

    impl = Uuid(as_uuid=True)
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> uuid.UUID | None:
        """Parse the hex form."""
        return None if value is None else uuid.UUID(hex=value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        """Return the hex form."""
        return None if value is None else uuid.UUID(str(value)).hex


class JsonDocument(TypeDecorator[Any]):
    """A JSON document, ``jsonb`` on PostgreSQL (whose dialect is imported only by a process
    on PostgreSQL, see ``store.dialects``); a Python None is stored as SQL NULL."""

    impl = JSON(none_as_null=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``jsonb`` on PostgreSQL, the dialect's JSON elsewhere."""
        if dialect.name == "postgresql":
            return dialect.type_descriptor(dialect_package(dialect.name).JSONB(none_as_null=True))
        return dialect.type_descriptor(self.impl_instance)


JSONValue = JsonDocument()
"""The type of every JSON column."""
