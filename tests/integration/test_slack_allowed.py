"""``SIGNOFF_ALLOWED_TEAMS`` and ``SIGNOFF_ALLOWED_ENTERPRISES``: which workspaces may install
and use the app. Installs go through the real OAuth flow against the local Slack."""

from __future__ import annotations

from pathlib import Path

from agent_runtime import ApprovalStatus, RunStatus
from bot.slack.allowed import REFUSED
from bot.slack.blocks import APPROVE
from store.models import slack_installations
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
    BotInstance,
)
from tests.integration.slack_readers import approvals_of, run_id_of
from tests.integration.slack_steps import (
    acked,
)
from tests.integration.workspaces_world import (
    ALPHA_CODE,
    BETA_CODE,
    TwoWorkspaces,
    install,
)


def _installed(bot: BotInstance) -> set[tuple[str, str]]:
    """The (enterprise, team) of every installation kept."""
    with bot.services.store.engine.connect() as conn:
        return {(r.enterprise_id, r.team_id) for r in conn.execute(slack_installations.select())}


def test_an_install_from_a_workspace_not_listed_is_refused_and_nothing_is_kept(
    tmp_path: Path, sqlite_url: str
) -> None:
    """With only alpha allowed, beta's install ends on a page saying nothing was installed, no
    installation of beta is kept and the token Slack issued is revoked; alpha's succeeds."""
    with TwoWorkspaces(tmp_path, sqlite_url) as two:
        two.extra["SIGNOFF_ALLOWED_TEAMS"] = f" {two.workspace.team_id} ,T0UNUSED"
        bot = two.instance()

        refused = install(bot, BETA_CODE)
        assert refused.status_code == 403, refused.text
        assert refused.headers["Content-Type"].startswith("text/html")
        assert "Signoff was not installed" in refused.text
        assert two.beta.team_id in refused.text
        assert _installed(bot) == set()
        assert two.oauth.revoked == [two.beta.team_id]

        assert install(bot, ALPHA_CODE).status_code == 200
        assert _installed(bot) == {("", two.workspace.team_id)}
        assert two.oauth.revoked == [two.beta.team_id]


def test_only_organizations_listed_may_install_organization_wide(
    tmp_path: Path, sqlite_url: str
) -> None:
    """With only organization E0GRID allowed, its organization-wide install is kept and
    E0OTHER's is refused."""
    with TwoWorkspaces(tmp_path, sqlite_url) as two:
        two.oauth.add(two.workspace, code="grid", enterprise_id="E0GRID", org_wide=True)
        two.oauth.add(two.beta, code="other", enterprise_id="E0OTHER", org_wide=True)
        two.extra["SIGNOFF_ALLOWED_ENTERPRISES"] = "E0GRID"
        bot = two.instance()

        assert install(bot, "other").status_code == 403
        assert install(bot, "grid").status_code == 200
        assert _installed(bot) == {("E0GRID", "")}


def test_commands_and_clicks_of_a_workspace_no_longer_listed_are_refused(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Beta installed while any workspace was allowed, then the list names alpha only: beta's
    command starts nothing and its approver's click decides nothing; alpha's still work."""
    with TwoWorkspaces(tmp_path, sqlite_url) as two:
        before = two.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            assert install(before, code).status_code == 200
        beta_run = run_id_of(acked(before.command(TASK, workspace=two.beta)))
        before.work()
        before.drain()
        refund = approvals_of(before, beta_run)["issue_refund"]
        card = two.card_in(two.beta, refund.id)

        two.extra["SIGNOFF_ALLOWED_TEAMS"] = two.workspace.team_id
        bot = two.instance(migrate=False)
        runs = len(bot.services.runtime.runs())

        assert acked(bot.command(TASK, workspace=two.beta)).body == REFUSED
        assert acked(bot.click(APPROVER, APPROVE, card, workspace=two.beta)).body == REFUSED
        assert len(bot.services.runtime.runs()) == runs
        assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
        assert bot.services.runtime.get(beta_run).status == RunStatus.WAITING

        alpha_run = run_id_of(acked(bot.command(TASK)))
        assert bot.services.runtime.get(alpha_run).status != RunStatus.CANCELLED
