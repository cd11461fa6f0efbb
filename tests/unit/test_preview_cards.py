"""A card with a preview shows what the call would do first and its arguments behind a button."""

from __future__ import annotations

import json
from dataclasses import replace

from slack_sdk.models.blocks import Block as SdkBlock
from slack_sdk.models.views import View

from agent_runtime import Approval, ApprovalId, ApprovalStatus
from agent_runtime.previews import Preview
from agent_runtime.side_effects import PREVIEW_CHANGED
from bot.cli.render import approval_line
from bot.slack import blocks
from bot.slack.batch_blocks import batch_card
from tests.unit.slack_fixtures import SPOOF, approval, decided

REFUND = Preview(
    text="Refund 49.99 USD to Dana <!channel> Example for order 1042",
    table=(("Customer", "Dana Example"), ("Order total", "49.99 USD")),
)
ARGS = {"order_id": "1042", "amount_cents": 4999}


def previewed(preview: Preview = REFUND) -> Approval:
    """A pending refund approval asked with ``preview``."""
    return replace(
        approval("issue_refund", ARGS), preview=preview.to_json(), preview_digest=preview.digest
    )


def valid(card: list[blocks.Block]) -> list[blocks.Block]:
    """The card's blocks, each checked by slack_sdk's Block Kit models."""
    for block in card:
        parsed = SdkBlock.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    return card


def test_the_preview_comes_first_and_the_arguments_are_behind_a_button() -> None:
    """Right after the facts the card says what the call would do, escaped; the raw
    arguments are not on the card but in the "View arguments" modal."""
    asked = previewed()
    _, card = blocks.approval_card(asked)
    valid(card)
    what = card[2]["text"]["text"]
    assert what == (
        "*What it will do*\nRefund 49.99 USD to Dana &lt;!channel&gt; Example for order 1042"
    )
    assert card[3]["fields"][1]["text"] == "*Order total*\n49.99 USD"
    assert '"amount_cents"' not in json.dumps(card)
    buttons = {e["action_id"]: e for e in card[-1]["elements"]}
    assert buttons[blocks.VIEW_ARGS]["text"]["text"] == "View arguments"
    modal = blocks.args_modal(asked)
    View(**modal).validate_json()
    assert '\\"amount_cents\\": 4999' in json.dumps(modal)


def test_a_card_without_a_preview_still_shows_its_arguments() -> None:
    """Tools that declare no preview keep the arguments on the card."""
    _, card = blocks.approval_card(approval("issue_refund", ARGS))
    assert '\\"amount_cents\\": 4999' in json.dumps(valid(card))
    assert "What it will do" not in json.dumps(card)


def test_a_failed_preview_says_so_and_that_nothing_runs_unseen() -> None:
    """When the preview could not be computed the card says why, escaped."""
    asked = replace(approval("issue_refund", ARGS), preview={"error": "HTTPError: <@U_EVIL>"})
    _, card = blocks.approval_card(asked)
    shown = json.dumps(valid(card))
    assert "*No preview:*" in shown
    assert "HTTPError: &lt;@U_EVIL&gt;" in shown


def test_hidden_characters_in_a_preview_mark_the_card() -> None:
    """A direction override in live data shows as an escape and warns the approver."""
    _, card = blocks.approval_card(previewed(Preview(text=SPOOF)))
    shown = json.dumps(valid(card), ensure_ascii=False)
    assert "\u202e" not in shown
    assert "contains invisible or direction-changing characters" in shown


def test_a_superseded_card_says_why_it_did_not_run() -> None:
    """Closed as superseded, the card names who approved, that it did not run, and why."""
    done = decided(previewed(), ApprovalStatus.SUPERSEDED, reason=PREVIEW_CHANGED)
    text, card = blocks.approval_card(done)
    valid(card)
    assert text.startswith("issue_refund: 🔁 Superseded")
    assert "🔁 Superseded (approved by <@U_DANA>, not run)" in card[0]["text"]["text"]
    assert "its preview differs" in card[0]["text"]["text"]
    assert "What it will do" in json.dumps(card)


def test_the_batch_and_the_command_line_show_the_preview() -> None:
    """The batch card lists each call with its preview; ``signoff approvals`` prints it."""
    asked = previewed()
    _, card = batch_card(3, [asked, replace(asked, id=ApprovalId("b" * 24))])
    assert (
        "*issue_refund*: Refund 49.99 USD to Dana &lt;!channel&gt;"
        in valid(card)[0]["text"]["text"]
    )
    line = approval_line(replace(asked, preview=Preview(text="Refund" + SPOOF).to_json()))
    assert "\n    Refundrefund to \\u202eexample.com@evil" in line


def test_a_table_value_of_several_lines_stays_indented_on_the_command_line() -> None:
    """An email body's further lines are printed under the first, indented with the listing,
    never at the start of a line; a label of several lines is put on one."""
    body = "Hello Dana,\nyour refund is on its way.\n\nThe support team"
    preview = Preview(table=(("To", "dana@example.com"), ("Body\nof it", body))).to_json()
    line = approval_line(replace(previewed(), preview=preview, preview_digest=None))
    assert line.splitlines()[1:] == [
        "    To: dana@example.com",
        "    Body of it: Hello Dana,",
        "      your refund is on its way.",
        "",
        "      The support team",
    ]
