"""``/agent status``, ``list`` and ``pending`` find old runs and approvals, not just recent ones."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_runtime import Actor, RunId
from agent_runtime.approvals import Approval, ApprovalKind, approval_id, args_hash
from agent_runtime.audit import AuditDraft
from agent_runtime.policy import PolicySnapshot
from agent_runtime.testing import AgentEnvironment
from bot.slack.views import list_text, pending_text, status_text
from tests.unit.agent_harness import AgentHarness

NEWER = 250
"""More newer runs or approvals than any fixed scan window would reach past."""
ANN = Actor(user_id="U_ANN")


@pytest.fixture
def env() -> AgentEnvironment:
    """An agent environment whose first run is Ann's, in channel C_OLD, then many others."""
    built = AgentHarness([]).env
    built.start("old task", requester=ANN, context={"slack": {"channel": "C_OLD"}})
    for n in range(NEWER):
        built.clock.advance(timedelta(seconds=1))
        built.start(f"task {n}", context={"slack": {"channel": "C_NEW"}})
    return built


def test_status_finds_a_persons_only_run_behind_newer_ones(env: AgentEnvironment) -> None:
    """``/agent status`` with no run shows the person's latest run however old it is."""
    assert "old task" in status_text(env.runtime, None, ANN)


def test_list_finds_a_channels_runs_behind_newer_ones(env: AgentEnvironment) -> None:
    """``/agent list`` in a channel shows its runs however many newer runs exist elsewhere."""
    assert "old task" in list_text(env.runtime, "C_OLD", ANN)


def test_pending_finds_an_approval_behind_newer_ones(env: AgentEnvironment) -> None:
    """``/agent pending`` shows an approval for Ann behind many newer ones for others."""
    (first, *others) = env.runtime.runs(limit=NEWER + 1)[::-1]
    _ask(env, first.id, ("U_ANN",), position=1)
    for n, run in enumerate(others):
        env.clock.advance(timedelta(seconds=1))
        _ask(env, run.id, ("U_OMAR",), position=n + 2)
    assert approval_id(first.id, 1) in pending_text(env.approvals, ANN)


def _ask(env: AgentEnvironment, run_id: RunId, approvers: tuple[str, ...], position: int) -> None:
    args = {"n": position}
    now = env.clock.now()
    approval = Approval(
        id=approval_id(run_id, position),
        run_id=run_id,
        position=position,
        kind=ApprovalKind.TOOL_CALL,
        tool="issue_refund",
        args=args,
        args_hash=args_hash(args),
        fingerprint="f" * 64,
        policy=PolicySnapshot(approvers=tuple(approvers)),
        requester=ANN,
        requested_at=now,
        deadline=now + timedelta(hours=1),
    )
    audit = AuditDraft(
        at=now, approval_id=approval.id, run_id=run_id, action="requested", actor=None, detail=None
    )
    env.approval_store.create_approval(approval, audit)
