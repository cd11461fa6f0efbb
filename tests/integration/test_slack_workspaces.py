"""Many workspaces: OAuth installs, per-workspace tokens, and decisions scoped by workspace."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.app.slack_mode import installations as slack_installations_of
from bot.slack.blocks import APPROVE
from bot.slack.uninstalls import HOME_KINDS
from store import HOME_REFRESH
from store.models import slack_home_tabs, slack_installations
from store.slack_installations import SqlInstallations
from tests.integration import cli_ok, run_cli, signoff_env
from tests.integration.home_steps import open_home
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    TASK,
    BotInstance,
    eventually,
)
from tests.integration.slack_readers import approvals_of, block_texts, outbox_rows, run_id_of
from tests.integration.slack_steps import (
    acked,
)
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


def _event(bot: BotInstance, team_id: str, event: dict[str, Any]) -> None:
    """Post a signed Events API callback from ``team_id``."""
    body = {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": "A0SIGNOFF",
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{time.monotonic_ns()}",
        "event_time": int(time.time()),
    }
    acked(bot.post(json.dumps(body).encode(), content_type="application/json"))


@pytest.mark.parametrize(
    "event",
    [
        {"type": "app_uninstalled"},
        {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["U0SIGNOFF"]}},
    ],
    ids=["app_uninstalled", "tokens_revoked"],
)
def test_a_workspace_removing_the_app_fails_its_waiting_runs_closed(
    two: TwoWorkspaces, event: dict[str, Any]
) -> None:
    """``app_uninstalled`` (or the bot token revoked) from beta forgets beta's installation
    and cancels beta's waiting run, its approvals closed with the reason; alpha's run waits on."""
    bot = two.instances[0]
    alpha, beta = _start(two, bot)
    installations = SqlInstallations(bot.services.store.engine)

    _event(bot, two.beta.team_id, {**event, "event_ts": f"{time.time():.6f}"})

    eventually(
        lambda: bot.services.runtime.get(beta).status == RunStatus.CANCELLED,
        what="beta's run cancelled",
    )
    assert installations.find("", two.beta.team_id) is None
    assert installations.find("", two.workspace.team_id) is not None
    closed = bot.services.approvals.store.list_approvals(run_id=beta)
    assert {a.status for a in closed} == {ApprovalStatus.CANCELLED}
    assert all("removed from the Slack workspace" in (a.reason or "") for a in closed)
    assert bot.services.runtime.get(alpha).status == RunStatus.WAITING
    pending = bot.services.approvals.store.list_approvals(run_id=alpha)
    assert {a.status for a in pending} == {ApprovalStatus.PENDING}


def _home_tabs(bot: BotInstance) -> set[tuple[str, str]]:
    """The (workspace, user) of every Home tab Signoff remembers as opened."""
    with bot.services.store.engine.connect() as conn:
        return {(r.workspace, r.user_id) for r in conn.execute(slack_home_tabs.select())}


def _home_notices(bot: BotInstance, team_id: str) -> list[dict[str, Any]]:
    """The Home tab notices addressed to workspace ``team_id``."""
    return [r for r in outbox_rows(bot) if r["kind"] in HOME_KINDS and r["team_id"] == team_id]


def test_a_workspace_removing_the_app_forgets_its_home_tabs_and_their_notices(
    two: TwoWorkspaces,
) -> None:
    """After ``app_uninstalled`` from beta, beta's opened Home tabs are forgotten and its
    queued publishes and refreshes (those its cancelled run caused too) dropped, never sent;
    alpha's tab stays and is published."""
    bot = two.instances[0]
    _start(two, bot)
    open_home(bot, APPROVER, team=two.beta.team_id)
    bot.drain()
    open_home(bot, APPROVER, team=two.beta.team_id)
    open_home(bot, APPROVER)
    assert [r["status"] for r in _home_notices(bot, two.beta.team_id)] == ["sent", "pending"]

    _event(bot, two.beta.team_id, {"type": "app_uninstalled", "event_ts": f"{time.time():.6f}"})

    eventually(lambda: not _home_notices(bot, two.beta.team_id), what="beta's notices dropped")
    assert _home_tabs(bot) == {(two.workspace.team_id, APPROVER)}
    bot.drain()
    assert not _home_notices(bot, two.beta.team_id)
    home = [r for r in outbox_rows(bot) if r["kind"] in HOME_KINDS]
    assert {(r["team_id"], r["status"]) for r in home} == {(two.workspace.team_id, "sent")}


def test_a_workspace_installing_the_app_again_has_its_home_tabs_refreshed_again(
    two: TwoWorkspaces,
) -> None:
    """Beta's approver, whose tab was refreshed before beta removed the app, opens it again
    after beta installs it again: an approval asked there refreshes it anew (its numbering,
    begun again, finds none of the forgotten notices' keys taken)."""
    bot = two.instances[0]
    open_home(bot, APPROVER, team=two.beta.team_id)
    _start(two, bot)
    refreshed = [r for r in _home_notices(bot, two.beta.team_id) if r["kind"] == HOME_REFRESH]
    assert [r["status"] for r in refreshed] == ["sent"]
    _event(bot, two.beta.team_id, {"type": "app_uninstalled", "event_ts": f"{time.time():.6f}"})
    eventually(lambda: not _home_notices(bot, two.beta.team_id), what="beta's notices dropped")

    two.oauth.add(two.beta, code="beta-again")
    assert install(bot, "beta-again").status_code == 200
    open_home(bot, APPROVER, team=two.beta.team_id)
    acked(bot.command(TASK, workspace=two.beta))
    bot.work()
    bot.drain()

    again = [r for r in _home_notices(bot, two.beta.team_id) if r["kind"] == HOME_REFRESH]
    assert [(r["key"].rsplit(":", 1)[1], r["status"]) for r in again] == [("1", "sent")]


def test_a_rotating_token_is_refreshed_before_it_expires(tmp_path: Path, sqlite_url: str) -> None:
    """Beta's bot token expiring within the rotation window is refreshed through
    ``oauth.v2.access`` and the refreshed one is kept and used (the old one no longer works)."""
    with TwoWorkspaces(tmp_path, sqlite_url, beta_token_lifetime=60) as two:
        bot = two.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            assert install(bot, code).status_code == 200
        installations = slack_installations_of(bot.services)

        def token() -> str | None:
            found = installations.find_bot(enterprise_id=None, team_id=two.beta.team_id)
            return None if found is None else found.bot_token

        installed = token()

        beta = run_id_of(acked(bot.command(TASK, workspace=two.beta)))
        bot.work()
        bot.drain()

        assert "refresh_token" in two.oauth.exchanges
        assert token() not in (installed, None)
        refund = approvals_of(bot, beta)["issue_refund"]
        assert two.card_in(two.beta, refund.id) is not None
        assert all(r["status"] == "sent" for r in outbox_rows(bot))


def test_the_cli_decides_only_for_the_workspace_it_names(two: TwoWorkspaces) -> None:
    """``signoff approve --as U_DANA`` needs ``--team`` in OAuth mode; beta's U_DANA is
    refused on alpha's approval, alpha's U_DANA approves it."""
    bot = two.instances[0]
    alpha, _ = _start(two, bot)
    refund = approvals_of(bot, alpha)["issue_refund"]
    env = signoff_env(two.database_url, extra=two.environment())

    unnamed = run_cli(env, "approve", refund.id, "--as", APPROVER)
    assert unnamed.returncode == 2, unnamed.stderr
    assert "--team" in unnamed.stderr
    other = run_cli(env, "approve", refund.id, "--as", APPROVER, "--team", two.beta.team_id)
    assert other.returncode == 1, other.stderr
    assert "not allowed" in other.stdout
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING

    cli_ok(env, "approve", refund.id, "--as", APPROVER, "--team", two.workspace.team_id)
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.APPROVED


def test_doctor_checks_every_installed_workspace(two: TwoWorkspaces) -> None:
    """In OAuth mode ``signoff doctor`` checks each installation's token and scopes, and the
    channel in the workspace ``--team`` names."""
    env = signoff_env(two.database_url, extra=two.environment())
    channel = two.workspace.resolve_channel("general").id

    lines = cli_ok(env, "doctor", "--channel", channel, "--team", two.workspace.team_id)

    assert [line.split(":")[0] for line in lines.splitlines()] == [
        "ok    signing secret",
        "ok    database",
        "ok    approvers",
        "ok    models",
        "ok    installations",
        f"ok    workspace {two.workspace.team_id}",
        "ok    scopes",
        "ok    channel",
        f"ok    workspace {two.beta.team_id}",
        "ok    scopes",
    ]


def test_doctor_says_how_to_install_when_no_workspace_has(tmp_path: Path, sqlite_url: str) -> None:
    """In OAuth mode with nothing installed yet, ``signoff doctor`` fails naming the install URL."""
    with TwoWorkspaces(tmp_path, sqlite_url) as two:
        env = signoff_env(two.database_url, extra=two.environment())
        cli_ok(env, "db", "upgrade")
        done = run_cli(env, "doctor")
    assert done.returncode == 1
    assert "FAIL  installations: none yet: open /slack/install" in done.stdout


def test_socket_mode_is_refused_in_oauth_mode(tmp_path: Path, sqlite_url: str) -> None:
    """``signoff serve --socket-mode`` in OAuth mode stops at once with a one-line error."""
    with TwoWorkspaces(tmp_path, sqlite_url) as two:
        env = signoff_env(two.database_url, extra=two.environment())
        done = run_cli(env, "serve", "--socket-mode")
    assert done.returncode != 0
    assert "SIGNOFF_SLACK_MODE=oauth needs the HTTP front" in done.stderr


def test_approver_lists_can_name_each_workspace_its_own_approvers(
    tmp_path: Path, sqlite_url: str
) -> None:
    """With ``U_DANA@<alpha>`` and ``U_ERIN@<beta>`` as approvers, beta's card and DMs name
    only beta's U_ERIN, beta's U_DANA cannot decide there, and beta's U_ERIN can."""
    alpha_team, beta_team = "T0SANDBOX", "T0BETA"
    approvers = (f"{APPROVER}@{alpha_team}", f"{SECOND_APPROVER}@{beta_team}")
    with TwoWorkspaces(tmp_path, sqlite_url, approvers=approvers) as two:
        bot = two.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            assert install(bot, code).status_code == 200
        assert (two.workspace.team_id, two.beta.team_id) == (alpha_team, beta_team)
        _, beta = _start(two, bot)
        refund = approvals_of(bot, beta)["issue_refund"]
        card = two.card_in(two.beta, refund.id)

        assert f"<@{SECOND_APPROVER}>" in block_texts(card)
        assert f"<@{APPROVER}>" not in block_texts(card)
        dms = {c.user for c in two.beta.channels() if c.is_im}
        assert dms == {SECOND_APPROVER}

        body, trigger = bot.click_body(APPROVER, APPROVE, card, workspace=two.beta)
        acked(bot.post(body))
        eventually(
            lambda: any(r["key"] == f"ephemeral:{trigger}" for r in outbox_rows(bot)),
            what="the refusal told to the clicker",
        )
        assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
        acked(bot.click(SECOND_APPROVER, APPROVE, card, workspace=two.beta))
        assert bot.decision(refund.id).status == ApprovalStatus.APPROVED


def test_a_quorum_a_workspace_cannot_meet_is_refused_there_when_asked(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Two approvals required from ``U_DANA@<alpha>`` and ``U_ERIN``: alpha's refund waits for
    both; beta's (only U_ERIN may decide there) is rejected as asked, its card saying why and
    by whom, and nobody in beta is asked."""
    alpha_team = "T0SANDBOX"
    approvers = (f"{APPROVER}@{alpha_team}", SECOND_APPROVER)
    extra = {"SIGNOFF_APPROVALS_REQUIRED": "2"}
    with TwoWorkspaces(tmp_path, sqlite_url, approvers=approvers, extra=extra) as two:
        bot = two.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            assert install(bot, code).status_code == 200
        alpha, beta = _start(two, bot)

        assert approvals_of(bot, alpha)["issue_refund"].status == ApprovalStatus.PENDING
        refused = approvals_of(bot, beta)["issue_refund"]
        assert refused.status == ApprovalStatus.REJECTED
        assert f"only 1 of its approvers may decide in {two.beta.team_id}" in (refused.reason or "")
        card = block_texts(two.card_in(two.beta, refused.id))
        assert "decided by policy:quorum" in card
        assert not [c for c in two.beta.channels() if c.is_im]
