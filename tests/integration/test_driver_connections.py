"""The driver connections of the hot path stay few, however many threads run statements."""

from __future__ import annotations

import threading

from sqlalchemy import text

from store import SqlStore
from store.driver import DriverConnections, Prepared
from tests.integration import wait_until

LOCK = 7_361_001
THREADS = 5
MOST = 2


def test_statements_beyond_the_bound_wait_for_a_connection(pg_store: SqlStore) -> None:
    """With five threads blocked in statements and a bound of two, the database sees two
    connections running them; the others wait their turn, and all run once released."""
    engine = pg_store.engine
    connections = DriverConnections(engine, most=MOST)
    blocked = Prepared(text(f"SELECT pg_advisory_xact_lock_shared({LOCK})"), engine.dialect)
    done: list[int] = []

    def run(index: int) -> None:
        connections.execute(blocked, {})
        done.append(index)

    def running() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE query LIKE 'SELECT pg_advisory_xact_lock_shared%' "
                        "AND datname = current_database()"
                    )
                ).scalar_one()
            )

    with engine.connect() as holder:
        holder.execute(text(f"SELECT pg_advisory_lock({LOCK})"))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        wait_until(lambda: running() == MOST, timeout=30, what="two statements blocked")
        seen = [running() for _ in range(20)]
        holder.execute(text(f"SELECT pg_advisory_unlock({LOCK})"))
        holder.commit()
    for thread in threads:
        thread.join(30)
    assert max(seen) == MOST
    assert sorted(done) == list(range(THREADS))
    connections.close()
