"""The dev panel's "Crash the worker" button, pressed while a refund is in flight."""

from __future__ import annotations

from devkit.dev import DevStack
from tests.browser.page import APPROVE, SandboxPage


def test_crashing_the_worker_mid_refund_resumes_the_run_with_one_charge(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """SIGKILL between the provider's charge and the journal: the run completes, one charge."""
    page.send("/agent refund order 1042 and email the customer")
    page.open_thread()
    page.act_as("U_DANA")
    page.click("hold-refund")
    page.wait_for_text("hold-status", "next new refund will be held")
    (refund,) = page.approval_cards(1)
    page.click_in_thread(APPROVE, refund)
    page.wait_for_text("hold-status", "crash the worker now", timeout=30)
    first_pid = dev_stack.worker.status().pid
    page.click("crash-worker")
    page.wait(lambda: dev_stack.worker.status().restarts == 1, what="the worker restarted")
    assert dev_stack.worker.status().pid != first_pid
    page.wait_for_text("thread", "🔧 issue_refund → ", timeout=45)
    (email,) = page.approval_cards(1)  # asked once the refund is done
    assert email != refund
    page.click_in_thread(APPROVE, email)
    page.wait_for_text("run-status", "completed", timeout=45)
    page.wait_for_text("thread", "A crash interrupted issue_refund")
    page.wait_for_text("ledger-summary", "1 charge")
    entries = dev_stack.provider.ledger.entries()
    refunds = [e for e in entries if e.method == "POST" and e.path == "/v1/refunds"]
    assert [e.created_charge for e in refunds] == [True, False]
    assert len({e.idempotency_key for e in refunds}) == 1
    assert refunds[1].status == 200
