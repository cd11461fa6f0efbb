"""Which conversation a ``tools/call`` names in its ``_meta``, and the run each one keys."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from bot.mcp.conversations import CONVERSATION_KEYS, MAX_LENGTH, conversation_id
from bot.mcp.exceptions import InvalidConversation
from bot.mcp.session_run import SessionKey

KEY = SessionKey(gateway="notes", client="U_AGENT", session="main")


def test_no_meta_or_no_known_key_names_no_conversation() -> None:
    """Without ``_meta``, or with none of the documented keys, a call names no conversation."""
    assert conversation_id(None) is None
    assert conversation_id({"progress_token": 1, "conversation": "c-1"}) is None


def test_signoffs_own_key_wins_over_the_other_documented_keys() -> None:
    """``io.signoff/conversation-id`` is read first, then ``openai/session``, then
    ``sessionID``."""
    meta = {"sessionID": "c", "openai/session": "b", "io.signoff/conversation-id": "a"}
    assert conversation_id(meta) == "a"
    assert conversation_id({"sessionID": "c", "openai/session": "b"}) == "b"
    assert conversation_id({"sessionID": "ses_01J"}) == "ses_01J"
    assert CONVERSATION_KEYS[0] == "io.signoff/conversation-id"


@pytest.mark.parametrize(
    "value", ["c-1", "v1/anon:AbC+d=", "x" * MAX_LENGTH, "user@example.com", "0.1_2"]
)
def test_a_short_plain_id_is_accepted(value: str) -> None:
    """Ids of 1 to 128 letters, digits and ``._:/+=@-`` are taken as they are."""
    assert conversation_id({"io.signoff/conversation-id": value}) == value


@pytest.mark.parametrize(
    "value", ["", "x" * (MAX_LENGTH + 1), "two words", "<!channel>", "a\nb", "é", 7, None, ["a"]]
)
def test_anything_else_is_refused_naming_the_key(value: Any) -> None:
    """An empty, long, non-string id or one with other characters is refused, and the error
    names the key and what an id may be."""
    with pytest.raises(InvalidConversation) as raised:
        conversation_id({"openai/session": value})
    assert str(raised.value) == (
        'the conversation id in _meta["openai/session"] must be a string of 1 to 128 letters, '
        "digits or . _ : / + = @ -"
    )


def test_each_conversation_is_a_run_of_its_own_and_none_keeps_todays_run() -> None:
    """A conversation's run id differs from the gateway's run and from other conversations';
    without one the run id is the one the gateway always had."""
    alpha, beta = replace(KEY, conversation="alpha"), replace(KEY, conversation="beta")
    assert len({KEY.run_id, alpha.run_id, beta.run_id}) == 3
    assert KEY.run_id == "fbe34946acab54ed8e42f22b3b20eb17"  # the id it had before conversations
    assert alpha.to_json()["conversation"] == "alpha"
    assert "conversation" not in KEY.to_json()
