"""Schema migrations (Alembic), applied on start and by ``signoff db upgrade``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

MIGRATIONS = Path(__file__).parent / "migrations"
ADVISORY_LOCK_ID = 0x5160FF  # serialises concurrent upgrades on PostgreSQL


def alembic_config(engine: Engine) -> Config:
    """Return an Alembic configuration bound to ``engine``'s migrations folder."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to ``revision``; safe to run from several processes at once."""
    _run(engine, lambda config: command.upgrade(config, revision))


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema down to ``revision``."""
    _run(engine, lambda config: command.downgrade(config, revision))


def _run(engine: Engine, action: object) -> None:
    config = alembic_config(engine)
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADVISORY_LOCK_ID})
        config.attributes["connection"] = connection
        action(config)  # type: ignore[operator]
