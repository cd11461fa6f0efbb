"""The Home tab's view: capped, oldest first, within Block Kit's limits, checked with
slack_sdk's View and Block models."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from agent_runtime import Actor, RunId, Wait, new_run_id
from agent_runtime.approvals import ApprovalId, approval_id
from agent_runtime.audit import AuditDraft
from agent_runtime.grants import Grant, GrantScope, similar
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from bot.slack.home import APPROVALS_SHOWN, GRANTS_SHOWN, home_for, home_view
from tests.unit.slack_fixtures import ASKED, DANA, HIDDEN, HOSTILE, approval, edited

MODAL_BLOCKS = 100


def checked(view: dict[str, Any]) -> dict[str, Any]:
    """``view`` after slack_sdk's models accepted it and each of its blocks."""
    View(**view).validate_json()
    for block in view["blocks"]:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    assert len(view["blocks"]) <= MODAL_BLOCKS
    return view


def grant(n: int) -> Grant:
    """An active grant given by Dana."""
    return Grant(
        id=f"{n:016x}",
        tool="issue_refund",
        scope=GrantScope.DAY,
        run_id="r1",
        source_approval=f"{n:024x}",
        when=similar({"amount_cents": 4999}),
        granted_by=DANA,
        granted_at=ASKED,
        expires_at=ASKED + timedelta(hours=24),
    )


def test_the_fullest_tab_fits_block_kit() -> None:
    """As many of the largest cards as the tab shows, a note and every grant still fit."""
    worst = edited(approval(args=HOSTILE, reason_asked=HIDDEN * 10), {"amount_cents": 1})
    cards = [dataclasses.replace(worst, id=ApprovalId(f"{n:024x}")) for n in range(APPROVALS_SHOWN)]
    grants = [grant(n) for n in range(GRANTS_SHOWN)]
    view = checked(home_view(cards, 12, [], grants, note="Not recorded: <@U_X>"))
    text = json.dumps(view["blocks"], ensure_ascii=False)
    assert "…and 12 more — use `/agent pending`" in text
    assert text.count('"action_id": "grant.revoke"') == GRANTS_SHOWN


def test_an_empty_tab_says_so() -> None:
    """Nothing waiting, no runs, no grants: each section says so."""
    text = json.dumps(checked(home_view([], 0, [], []))["blocks"])
    assert "Nothing is waiting on you." in text
    assert "You have no grants in force." in text
    assert "more" not in text


def _waiting_run(runs: InMemoryStore) -> RunId:
    run_id = runs.create_run(new_run_id(), "wf", None, ASKED).id
    ((_, lease),) = runs.claim_runs("w", limit=1, now=ASKED, expires_at=ASKED + timedelta(1))
    runs.suspend(lease, Wait(wake_at=None, key="approval:x"), ASKED)
    return run_id


def test_home_shows_the_oldest_decidable_approvals_and_counts_the_rest() -> None:
    """Of more approvals than the tab shows, the oldest come first and the rest are counted;
    one Dana asked for herself (which she may not decide) is left out."""
    runs = InMemoryStore()
    store = InMemoryApprovalStore(runs)
    run_id = _waiting_run(runs)
    asked = [
        approval(
            id=approval_id(run_id, n),
            run_id=run_id,
            position=n,
            requested_at=ASKED + timedelta(minutes=n),
        )
        for n in range(APPROVALS_SHOWN + 3)
    ]
    asked[0] = dataclasses.replace(asked[0], requester=DANA)
    for each in asked:
        draft = AuditDraft(
            at=ASKED, approval_id=each.id, run_id=run_id, action="requested", actor=None, detail={}
        )
        store.create_approval(each, draft)
    view = checked(home_for(store, runs, Actor(user_id="U_DANA"), ASKED))
    shown = [
        b["block_id"].removeprefix("approval:")
        for b in view["blocks"]
        if b.get("block_id", "").startswith("approval:")
    ]
    assert shown == [a.id for a in asked[1:APPROVALS_SHOWN]]
    assert "…and 3 more — use `/agent pending`" in json.dumps(view["blocks"], ensure_ascii=False)
