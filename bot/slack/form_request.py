"""Reading a Slack form body by its fields, not by the words its values contain.

Bolt decides whether a form body is an interaction by looking for the text ``payload``
anywhere in the raw body, so a slash command whose text, channel, user or team name
contains that word is read as an (empty) interaction and answered 404. Here a form body is
an interaction only when it has a ``payload`` field; the raw body, which the signature
covers, is left untouched. Behind ``bot.app.request_hygiene``'s guard, which has parsed the
body already (with the same reading), the request takes the guard's result instead of
parsing the body twice more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt import BoltContext, BoltRequest, BoltResponse
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.adapter.wsgi.http_request import WsgiHttpRequest
from slack_bolt.request.internals import build_context

from bot.app.request_hygiene import PARSED_BODY

FORM = "application/x-www-form-urlencoded"


def form_fields(raw_body: str, content_type: str | None) -> dict[str, str] | None:
    """Return the fields of a form body that is not an interaction; None for anything else."""
    if (content_type or "").strip().lower() != FORM or not raw_body or raw_body.startswith("{"):
        return None
    fields = dict(parse_qsl(raw_body, keep_blank_values=True))
    return None if "payload" in fields else fields


class SlackFormRequest(BoltRequest):
    """A ``BoltRequest`` whose form body is parsed by its fields (see the module)."""

    def __init__(
        self,
        *,
        body: str,
        query: str | dict[str, str] | dict[str, Sequence[str]] | None = None,
        headers: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        parsed: dict[str, Any] | None = None,
    ) -> None:
        """``parsed``, if given, is what ``body`` says (``request_hygiene.checked_body``)."""
        if parsed is not None:
            super().__init__(body="", query=query, headers=headers, context=context)
            self.raw_body = body
            self._read_as(parsed, context)
            return
        super().__init__(body=body, query=query, headers=headers, context=context)
        fields = form_fields(self.raw_body, self.content_type)
        if fields is not None and fields != self.body:
            self._read_as(fields, context)

    def _read_as(self, body: dict[str, Any], context: dict[str, Any] | None) -> None:
        self.body = body
        self.context = build_context(BoltContext(context or {}), body)

    def to_copyable(self) -> BoltRequest:
        """A copy for another thread, parsed the same way."""
        return SlackFormRequest(
            body=self.raw_body,
            query=self.query,
            headers=self.headers,
            context=self.context.to_copyable(),
        )


class SlackWsgiHandler(SlackRequestHandler):
    """Bolt's WSGI adapter, building ``SlackFormRequest``\\ s."""

    def dispatch(self, request: WsgiHttpRequest) -> BoltResponse:
        """Hand the request to the app."""
        parsed = request.environ.get(PARSED_BODY)
        return self.app.dispatch(
            SlackFormRequest(
                body=request.get_body(),
                query=request.query_string,
                headers=request.get_headers(),
                parsed=parsed if isinstance(parsed, dict) else None,
            )
        )


__all__ = ["SlackFormRequest", "SlackWsgiHandler", "form_fields"]
