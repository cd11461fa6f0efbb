"""The chaos suite's short form: every run completes, nothing happens twice or is lost.

``bench.chaos`` with ``SHORT``: two ``signoff serve`` on a PostgreSQL cluster of its own,
SIGKILLs at kill points, the database's connections terminated, the database restarted,
Slack unreachable then answering 429 (see ``bench/chaos.py``).
"""

from __future__ import annotations

import pytest

from bench.chaos import SHORT, chaos, table
from bench.chaos_points import PG_RESTART, SLACK_429, SLACK_DOWN, TERMINATE

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(400)]


def test_the_short_chaos_session_loses_nothing_and_doubles_nothing() -> None:
    """Runs under kills and database and Slack faults all complete, with no charge, email,
    decision or Slack message twice and none lost, and each fault recovered from."""
    report = chaos(SHORT)
    shown = table(report)
    counted = report.tally
    assert counted.completed == counted.started >= SHORT.runs, shown
    assert report.kills >= SHORT.kills, shown
    assert report.unplanned == 0, shown
    assert counted.duplicate_charges == counted.duplicate_emails == 0, shown
    assert counted.decided_twice == 0, shown
    assert counted.messages_lost == counted.messages_doubled == 0, shown
    for fault_class in (TERMINATE, PG_RESTART, SLACK_DOWN, SLACK_429):
        assert len(report.recoveries[fault_class]) == 1, shown
