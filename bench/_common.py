"""Small helpers shared by the benchmark modules."""

from __future__ import annotations

import os
import statistics
import uuid
from collections.abc import Callable
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def default_dsn() -> str:
    """The PostgreSQL DSN the benchmarks use unless told otherwise."""
    return os.environ.get("SIGNOFF_BENCH_PG_URL") or os.environ.get(
        "SIGNOFF_TEST_PG_URL", DEFAULT_DSN
    )


def fresh_name(prefix: str) -> str:
    """A unique, lower-case identifier safe to use unquoted (schema or table name)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def create_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def drop_schema(dsn: str, schema: str) -> None:
    """Drop ``schema`` and everything in it; never raises (cleanup path)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    except psycopg.Error:
        pass


def sqlalchemy_pg_url(dsn: str) -> str:
    """Turn a libpq DSN (URL or ``key=value`` form) into a ``postgresql://`` URL."""
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = quote(str(params.pop("user", "postgres")), safe="")
    password = params.pop("password", None)
    host = str(params.pop("host", "127.0.0.1"))
    port = str(params.pop("port", "5432"))
    dbname = quote(str(params.pop("dbname", "postgres")), safe="")
    auth = user if password is None else f"{user}:{quote(str(password), safe='')}"
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://{auth}@{host}:{port}/{dbname}" + (f"?{query}" if query else "")


def median_per_step(run: Callable[[], float], steps: int, repeats: int) -> float:
    """Call ``run`` (returns elapsed seconds for ``steps`` steps) ``repeats`` times;
    return the median seconds per step."""
    if steps < 1 or repeats < 1:
        raise ValueError("steps and repeats must be >= 1")
    return statistics.median(run() / steps for _ in range(repeats))
