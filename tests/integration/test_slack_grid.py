"""Enterprise Grid: the app installed organization-wide, requests from any of its workspaces.

Slack sends an organization-wide install's requests with the organization's id,
``is_enterprise_install`` true and the team of whichever workspace they come from (or none).
Two organizations install the app through the real OAuth flow; people of both have the
same user id strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.blocks import APPROVE
from store.models import slack_installations
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
    BotInstance,
    eventually,
)
from tests.integration.slack_readers import approvals_of, outbox_rows, run_id_of
from tests.integration.slack_steps import (
    acked,
)
from tests.integration.workspaces_world import TwoWorkspaces, install, on_grid

GRID, OTHER = "E0GRID", "E0OTHER"
GRID_CODE, OTHER_CODE = "code-for-the-grid-org", "code-for-the-other-org"


@pytest.fixture
def orgs(tmp_path: Path, sqlite_url: str) -> Iterator[TwoWorkspaces]:
    """Organization ``E0GRID`` (its channels in ``workspace``) and ``E0OTHER`` (in ``beta``),
    each with the app installed organization-wide."""
    with TwoWorkspaces(tmp_path, sqlite_url) as built:
        built.oauth.add(built.workspace, code=GRID_CODE, enterprise_id=GRID, org_wide=True)
        built.oauth.add(built.beta, code=OTHER_CODE, enterprise_id=OTHER, org_wide=True)
        bot = built.instance()
        for code in (GRID_CODE, OTHER_CODE):
            answer = install(bot, code)
            assert answer.status_code == 200, answer.text
        yield built


def _start_on_grid(orgs: TwoWorkspaces) -> RunId:
    """Start the refund run from workspace T0GRIDA of the grid organization; work it."""
    bot = orgs.instances[0]
    body = on_grid(bot.command_body(TASK), enterprise=GRID, team="T0GRIDA")
    run_id = run_id_of(acked(bot.post(body)))
    bot.work()
    bot.drain()
    return run_id


def _refusal_told(bot: BotInstance, trigger: str) -> None:
    """Wait for the refusal of the click that got ``trigger`` to be told to its clicker."""
    eventually(
        lambda: any(r["key"] == f"ephemeral:{trigger}" for r in outbox_rows(bot)),
        what="the refusal told to the clicker",
    )


def test_an_organization_wide_install_is_kept_and_found_by_its_enterprise(
    orgs: TwoWorkspaces,
) -> None:
    """Each organization's installation is kept under its enterprise alone; a command from one
    of its workspaces runs, and the card is posted with the organization's token."""
    bot = orgs.instances[0]
    with bot.services.store.engine.connect() as conn:
        rows = {(r.enterprise_id, r.team_id) for r in conn.execute(slack_installations.select())}
    assert rows == {(GRID, ""), (OTHER, "")}

    run_id = _start_on_grid(orgs)

    refund = approvals_of(bot, run_id)["issue_refund"]
    assert orgs.card_in(orgs.workspace, refund.id) is not None
    assert {r["status"] for r in outbox_rows(bot)} == {"sent"}
    run = bot.services.runtime.get(run_id)
    assert run.status == RunStatus.WAITING


def test_an_approver_of_another_organization_never_decides_one_of_the_org_does(
    orgs: TwoWorkspaces,
) -> None:
    """The approver id of organization E0OTHER clicking the grid's card changes nothing and
    is told so; the same id of the grid organization, clicking from another of its
    workspaces (or from none named), decides it for the organization."""
    bot = orgs.instances[0]
    run_id = _start_on_grid(orgs)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = orgs.card_in(orgs.workspace, refund.id)

    for team in ("T0OTHER1", None):
        body, trigger = bot.click_body(APPROVER, APPROVE, card, workspace=orgs.beta)
        acked(bot.post(on_grid(body, enterprise=OTHER, team=team)))
        _refusal_told(bot, trigger)
        assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING

    body, _ = bot.click_body(APPROVER, APPROVE, card)
    acked(bot.post(on_grid(body, enterprise=GRID, team=None)))
    decided = bot.decision(refund.id)
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_by is not None
    assert decided.decided_by.enterprise_id == GRID
