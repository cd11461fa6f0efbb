"""What Slack is answered by a process still reaching its database: 401 unless signed; a
command's ephemeral "starting" text; a modal kept open with that text; events refused for
Slack to deliver again; nothing else served."""

from __future__ import annotations

import io
import json
import time
from typing import Any
from urllib.parse import urlencode
from wsgiref.util import setup_testing_defaults

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.app.starting import STARTING_TEXT, starting_slack

SECRET = "s" * 32
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"


def call(
    body: bytes,
    *,
    content_type: str = FORM,
    secret: str = SECRET,
    path: str = "/slack/events",
    signed: bool = True,
) -> tuple[str, dict[str, str], bytes]:
    """Send ``body`` to the starting app as Slack would; return status, headers and body."""
    stamp = str(int(time.time()))
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    if signed:
        environ["HTTP_X_SLACK_REQUEST_TIMESTAMP"] = stamp
        signer = SignatureVerifier(secret)
        environ["HTTP_X_SLACK_SIGNATURE"] = signer.generate_signature(timestamp=stamp, body=body)
    setup_testing_defaults(environ)
    answered: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answered.update(status=status, headers=dict(headers))

    content = b"".join(starting_slack(SECRET)(environ, start_response))
    return answered["status"], answered["headers"], content


def command() -> bytes:
    """A slash command's form body."""
    return urlencode(
        {"command": "/agent", "text": "refund", "user_id": "U1", "team_id": "T1"}
    ).encode()


@pytest.mark.parametrize("secret", ["wrong-secret", None])
def test_a_request_not_signed_with_the_secret_is_refused_with_401(secret: str | None) -> None:
    """A wrong signature, or none, gets 401 and never the starting text."""
    status, _, body = call(command(), secret=secret or SECRET, signed=secret is not None)
    assert status == "401 Unauthorized"
    assert STARTING_TEXT.encode() not in body


def test_a_signed_command_is_answered_200_with_the_ephemeral_starting_text() -> None:
    """Slack shows an ack's text to whoever typed the command (a non-200 shows an error)."""
    status, headers, body = call(command())
    assert status == "200 OK"
    assert headers["Content-Type"] == JSON
    assert json.loads(body) == {"response_type": "ephemeral", "text": STARTING_TEXT}


def test_a_modal_submission_stays_open_with_the_text_under_its_first_input() -> None:
    """A ``view_submission`` is answered with that input's error, keeping what was typed."""
    view = {"state": {"values": {"reason": {"text": {"value": "too much"}}}}}
    payload = {"type": "view_submission", "view": view, "user": {"id": "U1"}}
    status, _, body = call(urlencode({"payload": json.dumps(payload)}).encode())
    assert status == "200 OK"
    assert json.loads(body) == {"response_action": "errors", "errors": {"reason": STARTING_TEXT}}


def test_events_are_refused_for_slack_to_retry_and_the_url_check_answered() -> None:
    """An event gets 503 with Retry-After (Slack delivers it again); ``url_verification``
    gets its challenge back."""
    event = json.dumps({"type": "event_callback", "event": {"type": "app_mention"}}).encode()
    status, headers, _ = call(event, content_type=JSON)
    assert status == "503 Service Unavailable"
    assert headers["Retry-After"] == "5"
    check = json.dumps({"type": "url_verification", "challenge": "c-42"}).encode()
    status, _, body = call(check, content_type=JSON)
    assert status == "200 OK"
    assert json.loads(body) == {"challenge": "c-42"}


def test_other_paths_answer_503_while_starting() -> None:
    """The install pages and the approvals API are unavailable, with Retry-After."""
    for path in ("/slack/install", "/slack/oauth_redirect", "/v1/approvals"):
        status, headers, _ = call(b"", path=path, signed=False)
        assert status == "503 Service Unavailable"
        assert headers["Retry-After"] == "5"
