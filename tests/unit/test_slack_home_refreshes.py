"""Whose Home tab each change re-publishes: the notices the Slack notifier queues with it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from agent_runtime import Actor, AgentInput, ApprovalStatus, RunId, RunStatus
from agent_runtime.grants import Grant, GrantScope
from agent_runtime.notices import Notice
from agent_runtime.rules import parse_predicate
from agent_runtime.testing import InMemoryStore
from bot.slack.notifier import GRANT, SlackNotifier
from store import HOME_REFRESH
from tests.unit.slack_fixtures import ALEX, ASKED, DANA, approval, decided

PLACE = {"channel": "C1", "team": "T1", "enterprise": "E1"}


def _notifier() -> SlackNotifier:
    store = InMemoryStore()
    store.create_run(RunId("r1"), "agent:x", {"context": {"slack": PLACE}}, ASKED)
    return SlackNotifier(store)


def _refreshed(notices: object) -> list[str]:
    assert isinstance(notices, (list, tuple))
    found = [n for n in notices if isinstance(n, Notice) and n.kind == HOME_REFRESH]
    for notice in found:
        assert (notice.team_id, notice.enterprise_id) == ("T1", "E1")
        assert notice.data["user"]["team_id"] == "T1"
    return [n.data["user"]["user_id"] for n in found]


def test_an_approval_asked_or_decided_refreshes_its_approvers_and_requester() -> None:
    """Asked, decided and expired: the requester, the approvers and those it escalates to;
    a reminder changes no tab."""
    notifier = _notifier()
    asked = approval()
    everyone = ["U_ALEX", "U_DANA", "U_OMAR", "U_BOSS"]
    assert _refreshed(notifier.approval_changed(asked, "requested")) == everyone
    assert _refreshed(notifier.approval_changed(asked, "reminded")) == []
    approved = decided(asked, ApprovalStatus.APPROVED)
    assert _refreshed(notifier.approval_changed(approved, "approve")) == everyone
    expired = decided(asked, ApprovalStatus.EXPIRED, by=None)
    assert _refreshed(notifier.approval_changed(expired, "expired")) == everyone


def test_an_approval_a_rule_decided_as_asked_refreshes_only_its_requester() -> None:
    """Nobody was asked, so only the requester's runs changed."""
    ruled = decided(approval(), ApprovalStatus.APPROVED, by=Actor(user_id="rule:small"))
    assert _refreshed(_notifier().approval_changed(ruled, "requested")) == ["U_ALEX"]


def test_a_grant_refreshes_its_grantor_and_its_message_goes_to_the_runs_workspace() -> None:
    """Made or revoked, a grant re-publishes its grantor's tab; its thread message is
    addressed to the workspace the run came from."""
    grant = Grant(
        id="g1",
        tool="issue_refund",
        scope=GrantScope.DAY,
        run_id="r1",
        source_approval="a" * 24,
        when=parse_predicate({"all": []}),
        granted_by=DANA,
        granted_at=ASKED,
        expires_at=ASKED + timedelta(hours=24),
    )
    notifier = _notifier()
    for action in ("created", "revoked"):
        notices = notifier.grant_changed(grant, action)
        assert _refreshed(notices) == ["U_DANA"]
        told = [n for n in notices if n.kind != HOME_REFRESH]
        assert [(n.team_id, n.enterprise_id) for n in told] == [("T1", "E1")]
    assert GRANT in {n.kind for n in notifier.grant_changed(grant, "created")}


def test_a_run_from_slack_refreshes_its_requester_when_it_begins_and_ends() -> None:
    """Begun, completed, failed or cancelled, a run started from Slack re-publishes its
    requester's tab; a run started elsewhere, or no agent's, refreshes none."""
    store = InMemoryStore()
    asked = AgentInput(task="refund", requester=ALEX, context={"slack": PLACE}).to_json()
    run = store.create_run(RunId("r2"), "agent:x", asked, ASKED)
    notifier = SlackNotifier(store)
    assert _refreshed(notifier.run_started(run)) == ["U_ALEX"]
    for status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert _refreshed(notifier.run_ended(replace(run, status=status))) == ["U_ALEX"]
    elsewhere = store.create_run(RunId("r3"), "agent:x", {**asked, "context": {}}, ASKED)
    other = store.create_run(RunId("r4"), "flow", {"context": {"slack": PLACE}}, ASKED)
    for quiet in (elsewhere, other):
        assert _refreshed(notifier.run_started(quiet)) == []
        assert _refreshed(notifier.run_ended(replace(quiet, status=RunStatus.COMPLETED))) == []
