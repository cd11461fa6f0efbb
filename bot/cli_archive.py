"""``signoff archive`` commands."""

from __future__ import annotations

from typing import Any


def add_commands(commands: Any) -> None:
    """Add the commands of this module."""
