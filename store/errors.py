"""The one place where driver errors become runtime errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from agent_runtime.exceptions import StoreUnavailable


@contextmanager
def translated() -> Iterator[None]:
    """Turn connection-level database failures into ``StoreUnavailable``."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
        raise StoreUnavailable(_first_line(exc)) from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(_first_line(exc)) from exc
        raise


def is_unique_violation(exc: sa_exc.IntegrityError) -> bool:
    """Tell whether an IntegrityError comes from a primary key or UNIQUE constraint."""
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    return "UNIQUE constraint failed" in str(exc.orig)


def _first_line(exc: BaseException) -> str:
    return str(getattr(exc, "orig", exc) or exc).strip().splitlines()[0][:300]
