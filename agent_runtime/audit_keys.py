"""Keys that authenticate audit entries: an HMAC-SHA256 the database cannot recompute."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field

from agent_runtime.exceptions import InvalidConfiguration

KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,32}")
"""What a key id may look like: it is stored beside each entry, so short and plain."""
MIN_SECRET_BYTES = 16


@dataclass(frozen=True, slots=True)
class AuditKey:
    """One HMAC key and the id stored with the entries it signs."""

    kid: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not KEY_ID.fullmatch(self.kid):
            raise InvalidConfiguration(
                f"audit key id {self.kid!r} must be 1-32 letters, digits, '_', '.' or '-'"
            )
        if len(self.secret) < MIN_SECRET_BYTES:
            raise InvalidConfiguration(
                f"audit key {self.kid!r} is shorter than {MIN_SECRET_BYTES} bytes"
            )

    def mac(self, seq: int, entry_hash: str) -> str:
        """Return the MAC of entry ``seq`` whose chained hash is ``entry_hash``."""
        message = f"signoff-audit:{seq}:{entry_hash}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class AuditKeys:
    """The keys in order of preference: the first signs new entries, every one verifies."""

    keys: tuple[AuditKey, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise InvalidConfiguration("no audit keys given")
        kids = [key.kid for key in self.keys]
        duplicated = sorted({kid for kid in kids if kids.count(kid) > 1})
        if duplicated:
            raise InvalidConfiguration(f"audit key ids given twice: {', '.join(duplicated)}")

    @property
    def kids(self) -> tuple[str, ...]:
        """The key ids, the signing one first."""
        return tuple(key.kid for key in self.keys)

    def sign(self, seq: int, entry_hash: str) -> tuple[str, str]:
        """Return (key id, MAC) for entry ``seq`` with the signing key."""
        return self.keys[0].kid, self.keys[0].mac(seq, entry_hash)

    def check(self, seq: int, entry_hash: str, kid: str, mac: str) -> bool | None:
        """True if ``mac`` is the MAC of the entry under key ``kid``; None if ``kid`` is unknown."""
        for key in self.keys:
            if key.kid == kid:
                return hmac.compare_digest(key.mac(seq, entry_hash), mac)
        return None
