"""Workspaces' Slack tokens encrypted at rest, with keys that can be rotated.

Each bot (and refresh) token of an installation is kept as ``fernet:`` and a Fernet token
(AES-128-CBC with an HMAC-SHA256, ``cryptography``'s ``Fernet``). Keys are listed newest
first: tokens are encrypted with the newest, and read with whichever key they were
encrypted with, so after a new key is put first the older rows stay readable and are
rewritten under it the next time they are saved (a new install, a rotated token), or all at
once by ``signoff slack rekey`` (``TokenCipher.resealed``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

PREFIX = "fernet:"
"""Marks an encrypted token (a row written before encryption holds the token itself)."""
TOKEN_FIELDS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
"""The fields of an installation that hold a credential."""


class BadTokenKey(ValueError):
    """A token encryption key is not a Fernet key (32 url-safe base64-encoded bytes)."""


class TokenUnreadable(Exception):
    """A stored token was encrypted with none of the configured keys (or was altered)."""

    def __init__(self, field: str, workspace: str = "") -> None:
        of = f" of workspace {workspace}" if workspace else ""
        super().__init__(
            f"a stored Slack {field}{of} cannot be decrypted with any key of "
            "SIGNOFF_TOKEN_ENCRYPTION_KEY: put the key it was written with back in the list "
            "(after the newest), or install the app again"
        )
        self.field = field
        self.workspace = workspace


class TokenCipher:
    """Encrypts and decrypts the tokens in an installation's JSON."""

    def __init__(self, keys: Iterable[str]) -> None:
        """``keys`` newest first; raises ``BadTokenKey`` (never showing a key) if one is bad."""
        fernets = []
        for number, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.strip().encode()))
            except (ValueError, TypeError):
                raise BadTokenKey(
                    f"key {number} is not a Fernet key (32 url-safe base64-encoded bytes; "
                    "make one with: python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())')"
                ) from None
        if not fernets:
            raise BadTokenKey("no key given")
        self._newest = fernets[0]
        self._keys = MultiFernet(fernets)

    def seal(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``data`` with each token encrypted under the newest key."""
        sealed = dict(data)
        for name in TOKEN_FIELDS:
            value = sealed.get(name)
            if isinstance(value, str) and value:
                sealed[name] = PREFIX + self._keys.encrypt(value.encode()).decode()
        return sealed

    def open(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``data`` with each token decrypted; raise ``TokenUnreadable`` if one cannot
        be."""
        opened = dict(data)
        for name in TOKEN_FIELDS:
            value = opened.get(name)
            if isinstance(value, str) and value.startswith(PREFIX):
                try:
                    opened[name] = self._keys.decrypt(value.removeprefix(PREFIX).encode()).decode()
                except InvalidToken:
                    raise TokenUnreadable(name) from None
        return opened

    def resealed(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """Return ``data`` with each token encrypted under the newest key, or None if each
        already is (a token kept in clear is not); raise ``TokenUnreadable`` if one cannot be
        read."""
        if all(self._newest_reads(data.get(name)) for name in TOKEN_FIELDS):
            return None
        return self.seal(self.open(data))

    def _newest_reads(self, value: Any) -> bool:
        """Whether ``value`` is no token, or one encrypted under the newest key."""
        if not isinstance(value, str) or not value:
            return True
        if not value.startswith(PREFIX):
            return False
        try:
            self._newest.decrypt(value.removeprefix(PREFIX).encode())
        except InvalidToken:
            return False
        return True


__all__ = ["PREFIX", "TOKEN_FIELDS", "BadTokenKey", "TokenCipher", "TokenUnreadable"]
