"""What a person reads in Slack is what would run: hidden characters, cuts, dates, cancels."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agent_runtime import ApprovalStatus
from agent_runtime.approvals import args_hash
from agent_runtime.models import ToolCall, text_reply, tool_reply
from bot.slack import blocks
from bot.slack.text import date, escape, truncate, user
from tests.unit.agent_harness import AgentHarness
from tests.unit.slack_fixtures import (
    ASKED,
    DANA,
    HIDDEN,
    SPOOF,
    approval,
    decided,
    hidden_in,
)

MARK = "contains invisible or direction-changing characters"


def test_a_direction_override_shows_as_an_escape_and_marks_the_card() -> None:
    """``\\u202e`` in arguments reaches the card as a visible escape, with a warning."""
    asked = approval(args={"to": SPOOF})
    text, card = blocks.approval_card(asked)
    shown = json.dumps(card, ensure_ascii=False)
    assert "\u202e" not in shown + text
    assert "refund to \\\\u202eexample.com@evil" in shown
    assert MARK in shown
    assert blocks.approval_ref(asked).endswith(args_hash({"to": SPOOF}))


def test_plain_arguments_carry_no_warning() -> None:
    """A card whose arguments hide nothing has no warning."""
    assert MARK not in json.dumps(blocks.approval_card(approval())[1])


def test_emoji_sequences_stay_whole_but_a_bare_joiner_shows() -> None:
    """A joiner inside an emoji (👩🏽‍💻) is kept; one between letters shows as an escape."""
    assert escape("👩🏽\u200d💻 ship") == "👩🏽\u200d💻 ship"
    assert escape("pay\u200dpal") == "pay\\u200dpal"


def test_hidden_characters_in_names_reasons_and_modals_are_escaped() -> None:
    """Tool names, reasons, modals and decision lines show hidden characters as escapes."""
    asked = approval(tool="pay" + HIDDEN, args={"to": SPOOF}, reason_asked=HIDDEN)
    done = decided(asked, ApprovalStatus.REJECTED, reason=SPOOF)
    rendered = [
        blocks.approval_card(asked),
        blocks.approval_card(done),
        blocks.edit_modal(asked),
        blocks.args_modal(asked),
    ]
    assert hidden_in(json.loads(json.dumps(rendered))) == []
    assert MARK in json.dumps(blocks.approval_card(done))


def test_the_edit_modal_round_trips_hidden_characters() -> None:
    """The edit modal shows JSON escapes that parse back to the real arguments."""
    asked = approval(args={"to": SPOOF, "note": HIDDEN})
    value = blocks.edit_modal(asked)["blocks"][-1]["element"]["initial_value"]
    assert hidden_in(value) == []
    assert json.loads(value) == asked.args


def test_a_cut_never_splits_an_entity_or_a_mention() -> None:
    """Shortening escaped text drops a partial ``&amp;`` or ``<@U…>`` instead of cutting it."""
    assert truncate(escape("R&D"), 4) == "R…"
    assert truncate("hi " + user("U_DANA"), 8) == "hi …"
    assert truncate(escape("a\u202eb"), 4) == "a…"


def test_a_long_ampersand_reason_stays_whole_entities_within_a_section() -> None:
    """A reason full of ``&`` fits its section without a broken entity at the cut."""
    done = decided(approval(), ApprovalStatus.REJECTED, reason="&" * 2000)
    _, card = blocks.approval_card(done)
    line = card[0]["text"]["text"]
    assert len(line) <= 3000
    assert line.replace("&amp;", "").count("&") == 0


def test_the_fallback_text_is_escaped_like_the_blocks() -> None:
    """A decided card's notification text cannot mention the channel."""
    text, _ = blocks.approval_card(decided(approval(tool="<!channel>"), ApprovalStatus.APPROVED))
    assert "<!channel>" not in text
    assert "&lt;!channel&gt;" in text


def test_the_edit_modal_falls_back_to_compact_json() -> None:
    """Arguments too long indented but short enough compact are offered compact, and so said."""
    args = {f"k{i:03}": [i, i] for i in range(150)}
    assert len(blocks.canonical(args)) > 3000 >= len(json.dumps(args, separators=(",", ":")))
    view = blocks.edit_modal(approval(args=args))
    value = view["blocks"][-1]["element"]["initial_value"]
    assert json.loads(value) == args
    assert len(value) <= 3000
    assert "compact" in json.dumps(view["blocks"])


def test_the_edit_modal_says_what_to_do_when_nothing_fits() -> None:
    """Arguments too long even compact leave the input empty, with what to do instead."""
    view = blocks.edit_modal(approval(args={"blob": "y" * 5000}))
    assert "initial_value" not in view["blocks"][-1]["element"]
    said = json.dumps(view["blocks"])
    assert "too long to edit here" in said
    assert "Reject" in said


def test_deadlines_and_decisions_use_slack_dates() -> None:
    """The deadline and the decision time render in each reader's zone, with a fallback."""
    asked = approval()
    stamp = int(asked.deadline.timestamp())
    assert date(datetime(2026, 3, 1, 13, 30, tzinfo=UTC)) == (
        f"<!date^{stamp}^{{date_short_pretty}} {{time}}|13:30 UTC Mar 01>"
    )
    assert date(asked.deadline) in json.dumps(blocks.approval_card(asked)[1])
    done = decided(asked, ApprovalStatus.APPROVED)
    assert done.decided_at is not None
    assert f" at {date(done.decided_at)}" in blocks.decision_line(done)
    assert ASKED.strftime("%H:%M UTC") not in blocks.decision_line(done)


def test_a_cancelled_runs_cards_say_cancelled() -> None:
    """Cancelling a run closes its cards as "Cancelled by …", never as "Rejected"."""
    harness = AgentHarness(
        [
            tool_reply(
                ToolCall(
                    id="c1",
                    name="issue_refund",
                    arguments={"order_id": "1042", "amount_cents": 4999},
                )
            ),
            text_reply("done"),
        ]
    )
    run_id = harness.start()
    harness.work()
    [pending] = harness.pending(run_id)
    harness.runtime.cancel(run_id, by=DANA)
    closed = harness.approval_store.get_approval(pending)
    assert closed.status == ApprovalStatus.CANCELLED
    line = blocks.decision_line(closed)
    assert line.startswith(f"🛑 Cancelled by {user(DANA.user_id)} at ")
    assert "Rejected" not in json.dumps(blocks.approval_card(closed), ensure_ascii=False)
    assert blocks.decision_line(decided(closed, ApprovalStatus.CANCELLED, by=None)).startswith(
        "🛑 Closed: run cancelled"
    )
