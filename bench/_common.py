"""Small helpers shared by the benchmark modules."""

from __future__ import annotations

import os
import statistics
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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


@contextmanager
def scratch_database(admin: str | None = None, prefix: str = "signoff_bench") -> Iterator[str]:
    """Create a fresh database on the server ``admin`` names (the benchmarks' by default),
    yield its DSN, and drop it (with any connections left) at the end."""
    admin = admin or default_dsn()
    name = fresh_name(prefix)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


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


@dataclass(frozen=True, slots=True)
class Paired:
    """Interleaved measurements of the engine and of a baseline, pair by pair.

    Ratios are taken within each pair (engine / baseline, measured one right after the
    other): on a shared machine whose load comes in bursts, both halves of a pair see the
    same conditions.  ``ratio`` is their median, ``low`` and ``high`` their range.
    """

    pairs: tuple[tuple[float, float], ...]

    @property
    def engine(self) -> float:
        """The engine's median."""
        return statistics.median(e for e, _ in self.pairs)

    @property
    def base(self) -> float:
        """The baseline's median."""
        return statistics.median(b for _, b in self.pairs)

    @property
    def ratios(self) -> list[float]:
        """Engine / baseline of each pair."""
        return [e / b for e, b in self.pairs]

    @property
    def ratio(self) -> float:
        """The median of the pairs' ratios."""
        return statistics.median(self.ratios)

    @property
    def low(self) -> float:
        """The smallest ratio of a pair."""
        return min(self.ratios)

    @property
    def high(self) -> float:
        """The largest ratio of a pair."""
        return max(self.ratios)

    @property
    def quartiles(self) -> tuple[float, float]:
        """The first and third quartiles of the pairs' ratios (their spread)."""
        if len(self.pairs) < 2:
            return self.ratio, self.ratio
        q1, _, q3 = statistics.quantiles(self.ratios, n=4, method="inclusive")
        return q1, q3


def take_turns(contestants: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Measure every contestant ``repeats`` times, one after the other, the order rotating
    each repeat, after one untimed call of each; return each one's measurements."""
    for measure in contestants.values():
        measure()
    names = list(contestants)
    results: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(contestants[name]())
    return results


def interleave(
    engine: Callable[[], float], base: Callable[[], float], repeats: int, *, warmup: bool = True
) -> Paired:
    """Measure ``engine`` and ``base`` ``repeats`` times each, alternating which goes first,
    after one untimed call of each (unless ``warmup`` is False)."""
    if warmup:
        samples = take_turns({"engine": engine, "base": base}, repeats)
        return Paired(tuple(zip(samples["engine"], samples["base"], strict=True)))
    pairs = []
    for repeat in range(repeats):
        if repeat % 2:
            b = base()
            pairs.append((engine(), b))
        else:
            e = engine()
            pairs.append((e, base()))
    return Paired(tuple(pairs))


def table(title: str, headers: list[str], rows: list[list[str]]) -> str:
    """Render an aligned text table: first column left, the others right."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        padded[0] = cells[0].ljust(widths[0])
        return "  ".join(padded)

    rule = "-" * len(line(headers))
    return "\n".join([title, rule, line(headers), rule, *map(line, rows), ""])
