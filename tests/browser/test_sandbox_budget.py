"""The budget card on the sandbox page, in a real headless Chromium.

``SIGNOFF_DEMO_BUDGET_USD=0.0015`` leaves the demo agent room for its first model call
($0.0012) and not its second, so a refund run stops and its thread gets the budget card.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from agent_runtime import ApprovalStatus, RunStatus, parse_run_id
from agent_runtime.approvals import ApprovalKind
from devkit.dev import DevStack
from tests.browser.page import APPROVE, SandboxPage
from tests.browser.stacks import running_dev

RAISE, END = "budget.raise", "budget.end"
PENDING = f'#thread button[data-action-id="{RAISE}"], #thread button[data-action-id="{APPROVE}"]'


@pytest.fixture
def budget_stack(tmp_path: Path) -> Iterator[DevStack]:
    """A ``signoff dev`` stack whose demo agent may spend $0.0015 a run."""
    with running_dev(tmp_path, SIGNOFF_DEMO_BUDGET_USD="0.0015") as stack:
        yield stack


def next_card(page: SandboxPage) -> tuple[str, str] | None:
    """Wait until the thread shows a pending card, or the run's end; return the card's button
    (action id, block id), or None once the run is done."""

    def shown() -> tuple[str, str] | None:
        found = page.driver.find_elements(By.CSS_SELECTOR, PENDING)
        if found:
            button = found[-1]
            action = str(button.get_attribute("data-action-id"))
            return action, str(button.get_attribute("data-block-id"))
        return ("", "") if "Done:" in page.text_of("thread") else None

    card = page.wait(shown, what="a pending card or the run's end")
    return card if card[0] else None


def raise_by_the_proposed_amount(page: SandboxPage, block: str) -> None:
    """Raise by …, keep the amount the modal proposes, confirm, and wait for the card."""
    modal = page.open_modal(RAISE, block, "Raise cost (USD) by")
    assert "Projection" in modal
    page.click("modal-submit")
    assert "Raise cost (USD) from" in page.wait_for_text("modal-root", "Confirm the raise")
    page.click("modal-submit")
    page.wait(lambda: not page.driver.find_element(By.ID, "modal-root").is_displayed())
    gone(page, RAISE, block)


def gone(page: SandboxPage, action: str, block: str) -> None:
    """Wait until the card's button is gone (the card was updated with the decision)."""
    selector = f'#thread button[data-action-id="{action}"][data-block-id="{block}"]'
    page.wait(lambda: not page.driver.find_elements(By.CSS_SELECTOR, selector), what=selector)


def test_dana_raises_the_budget_through_the_modal_and_the_run_completes(
    browser: webdriver.Chrome, budget_stack: DevStack
) -> None:
    """The budget card appears in the thread; Dana raises by the proposed amount (each time
    the run asks) and approves the refund; the run completes, charging the order once."""
    page = SandboxPage.open(browser, budget_stack.url)
    page.send("/agent refund order 1042")
    page.open_thread()
    page.wait_for_text("thread", "Budget used up: cost (USD)")
    page.act_as("U_DANA")
    raises = 0
    while (card := next_card(page)) is not None:
        action, block = card
        if action == RAISE:
            raise_by_the_proposed_amount(page, block)
            raises += 1
        else:
            page.click_in_thread(APPROVE, block)
            gone(page, APPROVE, block)
    assert raises >= 1
    page.wait_for_text("thread", "Raised cost (USD) to")
    page.wait_for_text("ledger-summary", "1 charge")
    approvals = budget_stack.services.approvals.store.list_approvals()
    budget = [a for a in approvals if a.kind == ApprovalKind.BUDGET]
    assert len(budget) == raises
    assert {(a.status, a.decided_by.user_id if a.decided_by else "") for a in budget} == {
        (ApprovalStatus.APPROVED, "U_DANA")
    }
    run = budget_stack.services.runtime.get(parse_run_id(budget[0].run_id))
    assert run.status == RunStatus.COMPLETED


def test_dana_ends_the_run_from_the_budget_card(
    browser: webdriver.Chrome, budget_stack: DevStack
) -> None:
    """End the run (confirmed in Slack's dialog) cancels the run: the card loses its buttons,
    the thread says the run was cancelled, and nothing is charged."""
    page = SandboxPage.open(browser, budget_stack.url)
    page.send("/agent refund order 1042")
    page.open_thread()
    page.wait_for_text("thread", "Budget used up: cost (USD)")
    page.act_as("U_DANA")
    card = next_card(page)
    assert card is not None
    assert card[0] == RAISE
    page.click_in_thread(END, card[1])
    assert "End the run?" in page.wait_for_text("confirm-root", "Keep waiting")
    page.click("confirm-yes")
    gone(page, END, card[1])
    page.wait_for_text("thread", "Cancelled")
    [asked] = budget_stack.services.approvals.store.list_approvals()
    assert asked.status == ApprovalStatus.CANCELLED
    assert asked.decided_by is not None
    assert asked.decided_by.user_id == "U_DANA"
    run = budget_stack.services.runtime.get(parse_run_id(asked.run_id))
    assert run.status == RunStatus.CANCELLED
    assert [e for e in budget_stack.provider.ledger.entries() if e.created_charge] == []
