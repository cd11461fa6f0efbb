"""The Slack notifier reads where a run was started at most once, whatever it notifies."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_runtime import ApprovalStatus, Run, RunId
from agent_runtime.testing import InMemoryStore
from bot.slack.notifier import CARD_UPDATE, SlackNotifier
from tests.unit.slack_fixtures import approval, decided

AT = datetime(2026, 1, 1, tzinfo=UTC)


class CountingStore(InMemoryStore):
    """An in-memory store that counts the runs it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_run(self, run_id: RunId) -> Run:
        """Count, then read as usual."""
        self.reads += 1
        return super().get_run(run_id)


def test_a_runs_slack_place_is_read_once_for_all_its_cards() -> None:
    """Asking, deciding and reminding one run's approvals reads the run once, not each time."""
    store = CountingStore()
    store.create_run(RunId("r1"), "agent:x", {"context": {"slack": {"channel": "C1"}}}, AT)
    notifier = SlackNotifier(store)
    asked = approval()
    for shown, action in ((asked, "requested"), (asked, "reminded")):
        assert notifier.approval_changed(shown, action)
    notices = notifier.approval_changed(decided(asked, ApprovalStatus.APPROVED), "approve")
    assert CARD_UPDATE in {n.kind for n in notices}
    assert store.reads == 1


def test_a_run_started_here_is_never_read_back() -> None:
    """A run this process started is known: its approvals' notices need no read."""
    store = CountingStore()
    run = store.create_run(RunId("r1"), "agent:x", {"context": {"slack": {"channel": "C1"}}}, AT)
    notifier = SlackNotifier(store)
    assert notifier.run_started(run)
    assert notifier.approval_changed(approval(), "requested")
    assert store.reads == 0
