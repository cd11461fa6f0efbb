"""Which run a ``tools/call`` is journaled in: the gateway's own, or its conversation's.

MCP has no conversation of its own (the 2026-07-28 revision drops protocol sessions, and a
stdio connection is one process's life), so a client names the conversation a call
belongs to in the request's ``_meta``: ``io.signoff/conversation-id`` (Signoff's own key,
namespaced as the specification asks of ``_meta`` keys), else ``openai/session``
(ChatGPT's anonymized conversation id) or ``sessionID`` (OpenCode's session). Each
conversation id is a run of its own, keyed by the gateway's name, client identity,
session key and the id, so a restarted gateway continues it. A call naming none is
journaled in the gateway's run, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import anyio
import anyio.to_thread

from agent_runtime import Actor
from bot.app.wiring import Services
from bot.mcp.exceptions import InvalidConversation, TooManyConversations
from bot.mcp.options import MAX_CONVERSATIONS
from bot.mcp.session_run import GatewayRun, attach
from bot.mcp.signoffs import SignOffs

CONVERSATION_KEYS = ("io.signoff/conversation-id", "openai/session", "sessionID")
"""The ``_meta`` keys a conversation id is read from, the first present winning."""
MAX_LENGTH = 128
_VALID = re.compile(rf"[A-Za-z0-9._:/+=@-]{{1,{MAX_LENGTH}}}")
RULE = f"a string of 1 to {MAX_LENGTH} letters, digits or . _ : / + = @ -"


def conversation_id(meta: Mapping[str, Any] | None) -> str | None:
    """Return the conversation id a request's ``_meta`` names, or None;
    ``InvalidConversation`` if it is not a short string of plain characters."""
    for key in CONVERSATION_KEYS:
        if meta is not None and key in meta:
            value = meta[key]
            if not isinstance(value, str) or not _VALID.fullmatch(value):
                raise InvalidConversation(key, RULE)
            return value
    return None


class Conversations:
    """The runs one gateway process journals in: its own, and one per conversation id,
    each taken on first use and held until the gateway stops."""

    def __init__(
        self,
        services: Services,
        own: GatewayRun,
        *,
        requester: Actor,
        channel: str | None,
        patience: timedelta,
        most: int = MAX_CONVERSATIONS,
    ) -> None:
        self._services = services
        self._most = most
        self._requester = requester
        self._channel = channel
        self._patience = patience
        self._runs: dict[str | None, GatewayRun] = {None: own}
        self._signoffs: dict[str | None, SignOffs] = {None: SignOffs(own, requester)}
        self._taking: dict[str, anyio.Lock] = {}
        """One lock per conversation: concurrent first calls take its run once."""

    async def signoffs(self, conversation: str | None) -> SignOffs:
        """Return the journal of ``conversation`` (None: the gateway's own run), taking its
        run first if needed; ``RunUnavailable`` if it is finished or held elsewhere,
        ``TooManyConversations`` for a new one beyond ``most``."""
        if conversation is None or conversation in self._signoffs:
            return self._signoffs[conversation]
        if len(self._signoffs) > self._most:  # the gateway's own run besides
            raise TooManyConversations(self._most)
        async with self._taking.setdefault(conversation, anyio.Lock()):
            if conversation not in self._signoffs:
                run = await anyio.to_thread.run_sync(self._attach, conversation)
                self._signoffs[conversation] = SignOffs(run, self._requester)
        return self._signoffs[conversation]

    def detach(self) -> None:
        """Park every run this gateway holds."""
        for run in list(self._runs.values()):
            run.detach()

    def _attach(self, conversation: str) -> GatewayRun:
        own = self._runs[None].key
        key = replace(own, conversation=conversation)
        run = attach(self._services, key, patience=self._patience, channel=self._channel)
        self._runs[conversation] = run  # here, so that a gateway stopping meanwhile parks it
        return run
