"""Steps of the Slack scenario tests on top of ``slack_harness``: require a prompt
acknowledgement, start a refund run from ``/agent`` up to its approvals, read an approval's
status, race requests at several instances, move the clock forward, and empty the PostgreSQL
database between scenarios."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from sqlalchemy import text

from agent_runtime import ApprovalStatus, RunId, RunStatus, SystemClock
from store import build_engine
from tests.conftest import reset_audit_heads
from tests.integration.slack_harness import ACK_LIMIT_S, TASK, Ack, BotInstance, SlackWorld
from tests.integration.slack_readers import run_id_of


def empty_postgres(url: str) -> None:
    """Empty every Signoff table of the (migrated) PostgreSQL database at ``url``."""
    engine = build_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "TRUNCATE runs, steps, attempts, events, approvals, audit_log, "
                    "outbox, api_approvals, api_keys, grants, slack_home_tabs, "
                    "slack_installations, slack_oauth_states"
                )
            )
            reset_audit_heads(conn)
    finally:
        engine.dispose()


# -- scenario steps ----------------------------------------------------------------------------


def acked(ack: Ack) -> Ack:
    """Require Slack's acknowledgement: HTTP 200 within 3 s."""
    assert ack.status == 200, (ack.status, ack.body)
    assert ack.seconds < ACK_LIMIT_S, f"ack took {ack.seconds:.2f}s"
    return ack


def start_refund_run(world: SlackWorld, bot: BotInstance, task: str = TASK) -> RunId:
    """Type the refund task, run the worker to the approvals and deliver the notices."""
    run_id = run_id_of(acked(bot.command(task)))
    bot.work()
    bot.drain()
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    return run_id


def has_status(bot: BotInstance, approval_id: str, status: ApprovalStatus) -> bool:
    """Tell whether the approval has ``status`` now."""
    return bot.services.approvals.get(approval_id).status == status


def race(*sends: tuple[BotInstance, bytes]) -> list[Ack]:
    """Post the requests at the same moment, one thread each; return the answers in order."""
    barrier = threading.Barrier(len(sends))
    answers: dict[int, Ack] = {}

    def send(index: int, target: BotInstance, body: bytes) -> None:
        barrier.wait()
        answers[index] = target.post(body)

    threads = [
        threading.Thread(target=send, args=(i, target, body))
        for i, (target, body) in enumerate(sends)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return [answers[i] for i in range(len(sends))]


class ShiftedClock:
    """The wall clock moved forward by ``offset`` (to reach a Retry-After or a claim expiry)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        """Return the shifted time."""
        return SystemClock().now() + self.offset

    def sleep(self, seconds: float) -> None:
        """Advance instead of sleeping."""
        self.offset += timedelta(seconds=seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Return at once: True if ``event`` is set, else after advancing."""
        if event.is_set():
            return True
        self.sleep(seconds)
        return False
