"""Many workspaces: OAuth installs, per-workspace tokens, and decisions scoped by workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.blocks import APPROVE
from store.models import slack_installations
from tests.integration.slack_harness import APPROVER, TASK, BotInstance, acked, eventually
from tests.integration.slack_readers import approvals_of, outbox_rows, run_id_of
from tests.integration.workspaces_world import ALPHA_CODE, BETA_CODE, TwoWorkspaces, install


@pytest.fixture
def two(tmp_path: Path, sqlite_url: str) -> Iterator[TwoWorkspaces]:
    """Two workspaces, one Signoff instance in OAuth mode, the app installed in both."""
    with TwoWorkspaces(tmp_path, sqlite_url) as built:
        bot = built.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            answer = install(bot, code)
            assert answer.status_code == 200, answer.text
        yield built


def _start(two: TwoWorkspaces, bot: BotInstance) -> tuple[RunId, RunId]:
    """Start the refund run from each workspace; return the run ids (alpha, beta)."""
    alpha = run_id_of(acked(bot.command(TASK)))
    beta = run_id_of(acked(bot.command(TASK, workspace=two.beta)))
    bot.work()
    bot.drain()
    return alpha, beta


def test_install_in_two_workspaces_then_each_runs_with_its_own_token(two: TwoWorkspaces) -> None:
    """After the OAuth dance in two workspaces, a command from each runs and its thread and
    cards are posted in its own workspace, with that workspace's token."""
    bot = two.instances[0]
    with bot.services.store.engine.connect() as conn:
        teams = {row.team_id for row in conn.execute(slack_installations.select())}
    assert teams == {two.workspace.team_id, two.beta.team_id}

    alpha, beta = _start(two, bot)

    for workspace, run_id in ((two.workspace, alpha), (two.beta, beta)):
        refund = approvals_of(bot, run_id)["issue_refund"]
        assert two.card_in(workspace, refund.id).channel == workspace.resolve_channel("general").id
    rows = {(r["run_id"], r["team_id"]) for r in outbox_rows(bot) if r["run_id"]}
    assert rows == {(alpha, two.workspace.team_id), (beta, two.beta.team_id)}
    assert all(r["status"] == "sent" for r in outbox_rows(bot))


def test_an_approver_of_one_workspace_cannot_decide_a_run_of_another(
    two: TwoWorkspaces,
) -> None:
    """The same approver id clicking in workspace beta on alpha's card changes nothing; the
    alpha approver's click then decides it."""
    bot = two.instances[0]
    alpha, _ = _start(two, bot)
    refund = approvals_of(bot, alpha)["issue_refund"]
    card = two.card_in(two.workspace, refund.id)

    body, trigger = bot.click_body(APPROVER, APPROVE, card, workspace=two.beta)
    acked(bot.post(body))
    eventually(
        lambda: any(r["key"] == f"ephemeral:{trigger}" for r in outbox_rows(bot)),
        what="the refusal told to the clicker",
    )
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING

    acked(bot.click(APPROVER, APPROVE, card))
    decided = bot.decision(refund.id)
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_by is not None
    assert decided.decided_by.team_id == two.workspace.team_id


def test_a_command_from_another_workspace_does_not_see_the_run(two: TwoWorkspaces) -> None:
    """``/agent status <run>`` and ``cancel`` from another workspace find no such run."""
    bot = two.instances[0]
    alpha, _ = _start(two, bot)
    for verb in ("status", "cancel"):
        answer = acked(bot.command(f"{verb} {alpha}", user="U_REQ", workspace=two.beta))
        assert "no run" in answer.text.lower() or "not found" in answer.text.lower(), answer.text
    assert bot.services.runtime.get(alpha).status == RunStatus.WAITING
