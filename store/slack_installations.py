"""The Slack app's installations in many workspaces, and the OAuth states of installs under way.

An installation is kept per workspace (``enterprise_id``, ``team_id``; '' where Slack gives
none): installing again, or refreshing a rotating token, replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, select, update

from store import dialects
from store.connections import reading, writing
from store.models import slack_installations, slack_oauth_states


class SqlInstallations:
    """Installations and OAuth states over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def save(self, enterprise_id: str, team_id: str, data: dict[str, Any], now: datetime) -> None:
        """Keep ``data`` as the workspace's installation, replacing any earlier one."""
        row = {"enterprise_id": enterprise_id, "team_id": team_id, "data": data}
        insert = dialects.insert(slack_installations, self.engine.dialect.name).values(
            **row, installed_at=now
        )
        with writing(self.engine) as conn:
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=["enterprise_id", "team_id"],
                    set_={"data": data, "installed_at": now},
                )
            )

    def find(self, enterprise_id: str, team_id: str) -> dict[str, Any] | None:
        """Return the workspace's installation, if the app is installed there."""
        query = select(slack_installations.c.data).where(
            slack_installations.c.enterprise_id == enterprise_id,
            slack_installations.c.team_id == team_id,
        )
        with reading(self.engine) as conn:
            found = conn.execute(query).scalar_one_or_none()
        return dict(found) if isinstance(found, dict) else None

    def all(self) -> list[dict[str, Any]]:
        """Return every installation, oldest first."""
        query = select(slack_installations.c.data).order_by(slack_installations.c.id)
        with reading(self.engine) as conn:
            return [dict(data) for data in conn.execute(query).scalars()]

    def rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> tuple[int, int]:
        """Replace each installation's data with what ``change`` returns for it (None: keep
        it), all in one transaction, the rows locked meanwhile; return how many were replaced,
        of how many. If ``change`` raises, none is."""
        query = select(slack_installations.c.id, slack_installations.c.data)
        with writing(self.engine) as conn:
            rows = conn.execute(query.order_by(slack_installations.c.id).with_for_update()).all()
            changed = [(row.id, change(dict(row.data))) for row in rows]
            for row_id, data in changed:
                if data is not None:
                    conn.execute(
                        update(slack_installations)
                        .where(slack_installations.c.id == row_id)
                        .values(data=data)
                    )
        return sum(data is not None for _, data in changed), len(rows)

    def delete(self, enterprise_id: str, team_id: str) -> int:
        """Forget the workspace's installation; return how many were removed (0 or 1)."""
        with writing(self.engine) as conn:
            result = conn.execute(
                delete(slack_installations).where(
                    slack_installations.c.enterprise_id == enterprise_id,
                    slack_installations.c.team_id == team_id,
                )
            )
        return int(result.rowcount)

    def issue_state(self, state: str, expires_at: datetime, now: datetime) -> None:
        """Record a new OAuth state (and forget the expired ones)."""
        with writing(self.engine) as conn:
            conn.execute(delete(slack_oauth_states).where(slack_oauth_states.c.expires_at <= now))
            conn.execute(slack_oauth_states.insert().values(state=state, expires_at=expires_at))

    def consume_state(self, state: str, now: datetime) -> bool:
        """Use up an OAuth state: True once, if it was issued and has not expired."""
        with writing(self.engine) as conn:
            result = conn.execute(
                delete(slack_oauth_states).where(
                    slack_oauth_states.c.state == state, slack_oauth_states.c.expires_at > now
                )
            )
        return int(result.rowcount) == 1


__all__ = ["SqlInstallations"]
