"""The one place where driver errors become runtime errors."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import exc as sa_exc

from agent_runtime.exceptions import InvalidConfiguration, StoreUnavailable


class _Translated:
    """The context of ``translated``: a class, as it wraps every statement of the hot path
    (a generator-based context manager costs several times as much to enter and leave)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if exc is None:
            return False
        if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError):
            if STATEMENT_POOLING in str(exc):
                raise InvalidConfiguration(STATEMENT_POOLING_HINT) from exc
            raise StoreUnavailable(_first_line(exc)) from exc
        if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
            raise StoreUnavailable(_first_line(exc)) from exc
        if isinstance(exc, sa_exc.ProgrammingError) and _sqlstate(exc) in POOLED_NAMES:
            raise StoreUnavailable(f"{_first_line(exc)}{POOLED_HINT}") from exc
        return False


_TRANSLATED = _Translated()


def translated() -> _Translated:
    """Turn connection-level database failures into ``StoreUnavailable``."""
    return _TRANSLATED


def is_unique_violation(exc: sa_exc.IntegrityError) -> bool:
    """Tell whether an IntegrityError comes from a primary key or UNIQUE constraint."""
    sqlstate = _sqlstate(exc)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    return "UNIQUE constraint failed" in str(exc.orig)


POOLED_NAMES = ("42P05", "26000")
"""A statement prepared by name already there on a connection that never prepared it, or
missing from the one that did: what a pooler in transaction mode does to them, the store
unavailable as it stands (not a fault of the run whose statement it was)."""
POOLED_HINT = (
    " (is a pooler in transaction mode between Signoff and PostgreSQL? then add"
    " pooling=transaction to the database URL)"
)

STATEMENT_POOLING = "not allowed in statement pooling mode"
"""What PgBouncer answers a transaction in statement mode: no retry can change that."""
STATEMENT_POOLING_HINT = (
    "a connection pooler in statement mode is between Signoff and PostgreSQL (it allows no"
    " transaction): pool by session, or by transaction with pooling=transaction in the"
    " database URL"
)

CONFLICTS = ("40P01", "40001")
"""PostgreSQL's deadlock and serialization failures: a transaction that may succeed again."""


def is_conflict(exc: BaseException) -> bool:
    """Tell whether ``exc`` (or the database error it was translated from) is a deadlock or
    serialization failure."""
    cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
    return getattr(getattr(cause, "orig", None), "sqlstate", None) in CONFLICTS


def _sqlstate(exc: sa_exc.DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def _first_line(exc: BaseException) -> str:
    return str(getattr(exc, "orig", exc) or exc).strip().splitlines()[0][:300]
