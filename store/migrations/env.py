"""Alembic environment: runs on the connection handed over by ``store.migrate``."""

from __future__ import annotations

from alembic import context

from store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
context.run_migrations()
