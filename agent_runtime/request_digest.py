"""The input hash of a model step, in time linear in the length of the conversation.

A model step's input is the whole request: system prompt, tools, output cap and every
message so far. Two formats of its hash exist, told apart by their first character:

- format 1 (journals written before format 2): the first 16 hex digits of the SHA-256 of
  the request's canonical JSON. Every model call encodes the whole conversation again, so
  replaying N turns costs O(N²). Journals that hold it still replay with it.
- format 2: each message is encoded and hashed once, when the conversation grows, and its
  digest is chained onto the conversation's (``head = SHA-256(head ‖ SHA-256(message))``).
  A request's digest is the SHA-256 of a version tag, the digests of the system prompt and
  of the tools, the output cap and the conversation's head. It is written as ``m`` and 15
  hex digits (``m`` is not a hex digit, so no format-1 hash starts with it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from agent_runtime.models.base import Message
from agent_runtime.serialization import JSONValue, canonical_json, input_hash

CHAINED_MARK = "m"
"""The first character of a format-2 hash."""

_TAG = b"signoff.model-request.2"
_EMPTY_HEAD = hashlib.sha256(_TAG).digest()


def is_chained(recorded: str) -> bool:
    """Tell whether ``recorded`` (a model step's input hash) is in format 2."""
    return recorded.startswith(CHAINED_MARK)


def legacy_request_hash(request: dict[str, Any]) -> str:
    """Return the format-1 hash of ``request`` (the JSON form a model step receives)."""
    return input_hash([request])


def request_hash(request: dict[str, Any], *, like: str | None = None) -> str:
    """Return the hash of ``request`` in the format of ``like`` (a recorded hash), else 2."""
    if like is not None and not is_chained(like):
        return legacy_request_hash(request)
    chain = ConversationDigest(request["system"], request["tools"])
    chain.extend(request["messages"])
    return chain.request_hash(request["max_output_tokens"])


class ConversationDigest:
    """The format-2 hash of a conversation that only grows: each message is hashed once."""

    def __init__(self, system: str, tools: Sequence[JSONValue]) -> None:
        self._fixed = _sha256(canonical_json(system)) + _sha256(canonical_json(list(tools)))
        self._head = _EMPTY_HEAD
        self._length = 0

    @property
    def length(self) -> int:
        """The number of messages chained so far."""
        return self._length

    def extend(self, messages: Iterable[JSONValue]) -> None:
        """Chain ``messages`` (JSON forms) onto the conversation, in order."""
        for message in messages:
            digest = _sha256(canonical_json(message, what="a message"))
            self._head = hashlib.sha256(self._head + digest).digest()
            self._length += 1

    def catch_up(self, messages: Sequence[Message]) -> None:
        """Chain the messages of ``messages`` past the ones already chained."""
        self.extend(m.to_json() for m in messages[self._length :])

    def request_hash(self, max_output_tokens: int | None) -> str:
        """Return the format-2 hash of a request of this conversation with this output cap."""
        cap = canonical_json(max_output_tokens).encode()
        digest = hashlib.sha256(_TAG + self._fixed + cap + b"\0" + self._head).hexdigest()
        return CHAINED_MARK + digest[:15]


def _sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()
