"""The sandbox page in a real headless Chromium: the whole product, driven as a person would."""

from __future__ import annotations

import os
from pathlib import Path

import requests
from selenium.webdriver.common.by import By

from agent_runtime import ApprovalStatus
from devkit.dev import DevStack
from tests.browser.page import APPROVE, SandboxPage

TASK = "/agent refund order 1042 and email the customer"
SCREENSHOT = os.environ.get("SANDBOX_SCREENSHOT", "")  # e.g. docs/sandbox.png


def _run_and_approve_both(page: SandboxPage) -> str:
    """As Rita start the demo run; as Dana approve the refund's card, then the email's (asked
    once the refund is done); return the thread's text."""
    page.send(TASK)
    page.wait_for_text("messages", "Started run")
    assert "Only visible to you" in page.text_of("messages")
    page.open_thread()
    page.act_as("U_DANA")
    (refund,) = page.approval_cards(1)
    assert "send_email" not in page.text_of("thread"), "no email before the refund is done"
    page.click_in_thread(APPROVE, refund)
    page.wait_for_text("thread", "issue_refund · ✅ Approved by @Dana")
    page.wait_for_text("thread", "🔧 issue_refund → ")
    (email,) = page.approval_cards(1)
    assert email != refund
    if SCREENSHOT:
        Path(SCREENSHOT).parent.mkdir(parents=True, exist_ok=True)
        page.driver.save_screenshot(SCREENSHOT)
    page.click_in_thread(APPROVE, email)
    page.wait_for_text("run-status", "completed")
    return page.wait_for_text("thread", "send_email · ✅ Approved by @Dana")


def test_requester_starts_a_run_and_an_approver_signs_both_cards_off(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """Rita's run asks for the refund, then the email; Dana approves both; the answer ends it."""
    thread = _run_and_approve_both(page)
    assert "issue_refund · ✅ Approved by @Dana" in thread
    assert not page.driver.find_elements(By.CSS_SELECTOR, f'#thread [data-action-id="{APPROVE}"]')
    thread = page.wait_for_text("thread", "Done:")
    assert thread.rstrip().endswith("✅ Done: Order 1042: Refund: done; Email: done")
    assert thread.index("🔧 issue_refund → ") < thread.index("🔧 send_email → ")
    page.wait_for_text("ledger-summary", "1 charge")
    assert [e.created_charge for e in dev_stack.provider.ledger.entries()].count(True) == 1


def test_an_outsiders_click_is_refused_on_the_page(page: SandboxPage, dev_stack: DevStack) -> None:
    """Eve's and Rita's (not approvers) clicks are refused in ephemerals only they see."""
    page.send(TASK)
    page.open_thread()
    page.act_as("U_EVE")
    (refund,) = page.approval_cards(1)
    page.click_in_thread(APPROVE, refund)
    thread = page.wait_for_text("thread", "you are not allowed to decide this approval")
    assert "Only visible to you" in thread
    page.act_as("U_RITA")
    assert "not allowed" not in page.text_of("thread")
    page.click_in_thread(APPROVE, refund)
    page.wait_for_text("thread", "you are not allowed to decide this approval")
    page.act_as("U_DANA")
    assert "not allowed" not in page.text_of("thread")
    approvals = dev_stack.services.approvals.store.list_approvals()
    assert {a.status for a in approvals} == {ApprovalStatus.PENDING}
    assert page.approval_cards(1) == [refund]


def test_untrusted_text_is_shown_as_text_never_as_markup(page: SandboxPage) -> None:
    """Markup in a task reaches the page escaped: no element is made from it."""
    page.send("/agent refund order 1042 <img src=x id=pwned> <@U_EVE> <!channel>")
    text = page.wait_for_text("messages", "<img src=x id=pwned> <@U_EVE> <!channel>")
    assert "@Eve" not in text
    assert not page.driver.find_elements(By.ID, "pwned")


def test_the_reject_modal_shows_the_apps_validation_errors(page: SandboxPage) -> None:
    """Reject opens a modal; an empty reason comes back as response_action errors in the modal;
    the rejected refund is never followed by an email claiming it."""
    page.send(TASK)
    page.open_thread()
    page.act_as("U_OMAR")
    (refund,) = page.approval_cards(1)
    page.open_modal("approval.reject", refund, "Why? The agent reads this.")
    page.click("modal-submit")
    page.wait_for_text("modal-root", "Give the agent a reason.")
    page.driver.find_element(By.CSS_SELECTOR, "#modal-root textarea").send_keys("Not this one.")
    page.click("modal-submit")
    thread = page.wait_for_text("thread", "issue_refund · ❌ Rejected by @Omar")
    assert "“Not this one.”" in thread
    assert not page.driver.find_elements(By.ID, "modal-submit")
    thread = page.wait_for_text("thread", "Email: not sent, as no refund was made")
    assert "send_email" not in thread


def test_fork_from_here_on_the_ephemeral_history_forks_the_run(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """Rita clicks History, then "Fork from here" on the ephemeral history: the run is forked."""
    page.send(TASK)
    page.open_thread()
    page.approval_cards(1)  # the model has been called: there is a step to fork from
    page.click_last('#messages [data-action-id="run.history"]')
    page.click_last('#messages .ephemeral [data-action-id="run.fork"]')
    told = page.wait_for_text("messages", "Forked run")
    (run,) = [r for r in dev_stack.services.runtime.runs() if r.forked_from is None]
    (forked,) = dev_stack.services.runtime.forks(run.id)
    assert f"Forked run {forked.id} from step {forked.fork_at} of {run.id}" in told


def test_a_refund_whose_order_changed_since_its_card_is_refused_and_asked_again(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """The card says "Refund 49.99 USD"; the order turns to EUR before Dana approves: the
    worker refuses the refund, the card shows it superseded, and a new card asks again."""
    page.send(TASK)
    page.open_thread()
    page.act_as("U_DANA")
    (refund,) = page.approval_cards(1)
    assert "Refund 49.99 USD to Dana Example for order 1042" in page.text_of("thread")
    changed = requests.patch(
        f"{dev_stack.provider.url}/v1/orders/1042", json={"currency": "EUR"}, timeout=10
    )
    assert changed.ok, changed.text
    page.click_in_thread(APPROVE, refund)
    page.wait_for_text("thread", "🔁 Superseded (approved by @Dana, not run)")
    page.wait_for_text("thread", "Refund 49.99 EUR to Dana Example for order 1042")
    (again,) = page.approval_cards(1)
    assert again != refund
    assert [e.created_charge for e in dev_stack.provider.ledger.entries()].count(True) == 0
