"""Schema migrations (Alembic), applied on start and by ``signoff db upgrade``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from store.errors import translated

if TYPE_CHECKING:  # Alembic is imported only when a migration has to run
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
ADVISORY_LOCK_ID = 0x5160FF  # serialises concurrent upgrades on PostgreSQL


def alembic_config(engine: Engine) -> Config:
    """Return an Alembic configuration bound to ``engine``'s migrations folder."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def latest_revision() -> str:
    """The newest migration's revision: files are named ``NNNN_<what>.py``, ids ``NNNN``."""
    return max(p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None for an empty database)."""
    with engine.connect() as conn:
        return _revision_on(conn)


def _revision_on(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    revision: str | None = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return revision


def covers(revision: str | None) -> bool:
    """Whether a schema at ``revision`` has every migration this code knows. A newer one
    does: during a rolling upgrade the old code runs on it."""
    return revision is not None and revision >= latest_revision()


def is_current(engine: Engine) -> bool:
    """Tell whether the schema has every migration this code knows (``StoreUnavailable`` if
    unreachable; ``covers``)."""
    with translated():
        return covers(current_revision(engine))


def upgrade(engine: Engine, revision: str = "head") -> str | None:
    """Bring the schema up to ``revision``; safe to run from several processes at once (the
    next waits for the first, then finds nothing to do). Return the revision it found, read
    under that lock. A schema newer than this code's is left as it is: during a rolling
    upgrade the old code runs on it (Alembic, which knows no such revision, would refuse
    it)."""
    if revision == "head":
        with translated():
            found = current_revision(engine)
        if covers(found):
            return found  # the common case, without loading Alembic
    from alembic import command

    return _run(engine, lambda config: command.upgrade(config, revision))


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema down to ``revision``."""
    from alembic import command

    _run(engine, lambda config: command.downgrade(config, revision))


def _run(engine: Engine, action: object) -> str | None:
    """Run ``action`` under the migrations' lock; return the revision found once it held."""
    config = alembic_config(engine)
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADVISORY_LOCK_ID})
        found = _revision_on(connection)
        config.attributes["connection"] = connection
        action(config)  # type: ignore[operator]
    return found
