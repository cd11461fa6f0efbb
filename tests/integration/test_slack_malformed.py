"""Malformed requests to ``/slack/events`` get a 4xx before any listener runs, never a 500.

Each request is sent as raw HTTP over loopback to the Bolt app served under WSGI, so
headers can be missing or repeated and bodies need not decode.
"""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import pytest

from bot.app.request_hygiene import MAX_BODY_BYTES
from tests.integration.slack_harness import (
    FORM,
    HTTP_TIMEOUT_S,
    SIGNING_SECRET,
    BotInstance,
    sign,
)

JSON = "application/json"
COMMAND = b"command=%2Fagent&text=hello&user_id=U1&team_id=T1&channel_id=C1"


@dataclass(frozen=True)
class Malformed:
    """A request to send: body, content type, and header changes after signing."""

    body: bytes = COMMAND
    content_type: str | None = FORM
    stamp: str | None = None
    """The timestamp header and the one signed (now when None)."""
    extra: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)


def _payload(value: str) -> bytes:
    return b"payload=" + quote(value).encode()


CASES = {
    "non-numeric timestamp": (Malformed(stamp="not-a-number"), 401),
    "empty timestamp": (Malformed(stamp=""), 401),
    "fractional timestamp": (Malformed(stamp="1767225600.5"), 401),
    "missing timestamp": (Malformed(drop=("X-Slack-Request-Timestamp",)), 401),
    "missing signature": (Malformed(drop=("X-Slack-Signature",)), 401),
    "duplicate timestamp": (Malformed(extra=(("X-Slack-Request-Timestamp", "now"),)), 401),
    "duplicate signature": (Malformed(extra=(("X-Slack-Signature", "same"),)), 401),
    "non-UTF-8 body": (Malformed(body=b"command=%2Fagent&text=\xff\xfe"), 400),
    "invalid percent-encoding": (Malformed(body=b"command=%2Fagent&text=%ff"), 400),
    "form field without a value": (Malformed(body=b"command=%2Fagent&text"), 400),
    "payload not JSON": (Malformed(body=_payload("{not json")), 400),
    "payload a JSON list": (Malformed(body=_payload("[1, 2]")), 400),
    "payload a JSON string": (Malformed(body=_payload('"block_actions"')), 400),
    "payload null": (Malformed(body=_payload("null")), 400),
    "JSON body not an object": (Malformed(body=b"[1, 2]", content_type=JSON), 400),
    "JSON body not JSON": (Malformed(body=b"{nope", content_type=JSON), 400),
    "JSON body sent as a form": (Malformed(body=b'{"type": "event_callback"}'), 415),
    "JSON body sent as text": (
        Malformed(body=b'{"type": "event_callback"}', content_type="text/plain"),
        415,
    ),
    "no content type": (Malformed(content_type=None), 415),
    "huge body": (Malformed(body=b"text=" + b"a" * (2 * 1024 * 1024)), 413),
}


def _send(bot: BotInstance, request: Malformed) -> tuple[int, bytes]:
    """POST ``request`` as raw HTTP, signed with the signing secret over its exact body."""
    stamp = str(int(time.time())) if request.stamp is None else request.stamp
    headers = {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": sign(SIGNING_SECRET, stamp, request.body),
    }
    if request.content_type is not None:
        headers["Content-Type"] = request.content_type
    url = urlsplit(bot.url)
    connection = http.client.HTTPConnection(url.netloc, timeout=HTTP_TIMEOUT_S)
    try:
        connection.putrequest("POST", url.path)
        for name, value in headers.items():
            if name not in request.drop:
                connection.putheader(name, value)
        for name, _ in request.extra:
            connection.putheader(name, headers[name])
        connection.putheader("Content-Length", str(len(request.body)))
        # a body over the limit is refused by its declared length alone: send none of it,
        # or the refusal races the upload (a broken pipe, or a reset that eats the answer)
        connection.endheaders(None if len(request.body) > MAX_BODY_BYTES else request.body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("request_and_status", CASES.values(), ids=CASES.keys())
def test_malformed_request_is_a_client_error(
    bot: BotInstance, request_and_status: tuple[Malformed, int]
) -> None:
    """A request malformed before any listener can run is refused with its 4xx, not a 500."""
    request, status = request_and_status
    assert _send(bot, request)[0] == status
    assert bot.services.runtime.runs() == [], "no listener ran"


def test_well_formed_command_is_still_accepted(bot: BotInstance) -> None:
    """The same raw request, well formed and signed, reaches the listener."""
    assert _send(bot, Malformed())[0] == 200
