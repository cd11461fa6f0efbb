"""API keys: high-entropy random keys, stored as their SHA-256, shown once at creation."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from bot.api.exceptions import KeyNameTaken
from store import SqlApiStore

KEY_PREFIX = "sk_signoff_"
SECRET_PREFIX = "whsec_"  # noqa: S105 (a prefix, not a secret)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewKey:
    """A client's key and webhook secret, as shown (once) when it is created."""

    name: str
    key: str
    webhook_secret: str


def hash_key(key: str) -> str:
    """Return the SHA-256 (hex) under which ``key`` is stored."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(store: SqlApiStore, name: str, now: datetime) -> NewKey:
    """Create the client ``name`` with a new random key; ``KeyNameTaken`` if it exists."""
    new = NewKey(
        name=name,
        key=KEY_PREFIX + secrets.token_urlsafe(32),
        webhook_secret=SECRET_PREFIX + secrets.token_urlsafe(32),
    )
    if not store.create_key(name, hash_key(new.key), new.webhook_secret, now):
        raise KeyNameTaken(f"an API client named {name!r} exists already")
    return new
