"""Fewer, better prompts on the sandbox page: Approve all, "Why?" and a 24-hour grant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from agent_runtime import ApprovalStatus
from devkit.dev import DevStack
from tests.browser.page import APPROVE, SandboxPage
from tests.browser.stacks import running_dev

APPROVE_ALL = "batch.approve_all"
WHY = "approval.why"
GRANT_DAY = "grant.day"
REVOKE = "grant.revoke"


@pytest.fixture
def granting_stack(tmp_path: Path) -> Iterator[DevStack]:
    """A ``signoff dev`` stack where Dana may allow similar calls for 24 hours."""
    with running_dev(tmp_path, SIGNOFF_GRANT_APPROVERS="U_DANA") as stack:
        yield stack


def open_thread(page: SandboxPage, number: int) -> None:
    """Open the thread of the channel's ``number``-th run (once it has one)."""

    def clicked() -> bool:
        links = page.driver.find_elements(By.CSS_SELECTOR, "#messages .replies-link")
        if len(links) < number:
            return False
        links[number - 1].click()
        return True

    page.wait(clicked, what=f"the thread of run {number}")
    page.wait(lambda: page.driver.find_element(By.ID, "thread").is_displayed())


def test_approve_all_signs_off_every_refund_of_one_turn(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """Two refunds proposed in one turn are approved with one click on Approve all, each
    decided on its own, and each order is charged once."""
    page.send("/agent refund orders 1042 and 1043")
    page.open_thread()
    page.act_as("U_DANA")
    assert len(page.approval_cards(2)) == 2
    page.wait_for_text("thread", "2 calls from one model turn wait for sign-off")
    page.click_last(f'#thread button[data-action-id="{APPROVE_ALL}"]')
    page.wait(
        lambda: page.text_of("thread").count("issue_refund · ✅ Approved by @Dana") == 2,
        what="both refunds approved by Dana",
    )
    page.wait_for_text("ledger-summary", "2 charges")
    approvals = dev_stack.services.approvals.store.list_approvals()
    decided = [a for a in approvals if a.tool == "issue_refund"]
    assert {a.status for a in decided} == {ApprovalStatus.APPROVED}
    assert {a.decided_by.user_id for a in decided if a.decided_by} == {"U_DANA"}
    entries = dev_stack.provider.ledger.entries()
    charged = sorted(e.body["order_id"] for e in entries if e.created_charge)
    assert charged == ["1042", "1043"]


def test_why_shows_the_model_step_with_what_came_from_outside_marked(
    page: SandboxPage,
) -> None:
    """ "Why?" opens a modal with the proposing step: the task is marked untrusted and shown as
    text, and nothing is decided by opening it."""
    page.send("/agent refund order 1042 and email the customer <i id=planted>now</i>")
    page.open_thread()
    page.act_as("U_DANA")
    (refund,) = page.approval_cards(1)
    modal = page.open_modal(WHY, refund, "Why this call?")
    assert "was proposed by the model at step" in modal
    assert "Untrusted · the task, from @Rita" in modal
    assert "<i id=planted>now</i>" in modal
    assert not page.driver.find_elements(By.ID, "planted")
    page.click("modal-close")
    page.wait(lambda: not page.driver.find_element(By.ID, "modal-root").is_displayed())
    assert page.approval_cards(1) == [refund]


def test_a_24_hour_grant_approves_a_smaller_refund_until_it_is_revoked(
    browser: webdriver.Chrome, granting_stack: DevStack
) -> None:
    """Dana approves a 49.99 refund and allows similar ones for 24 h (the predicate shown first);
    a later 25.00 refund is then decided by the grant, and once she revokes it a refund asks
    a person again."""
    page = SandboxPage.open(browser, granting_stack.url)
    page.send("/agent refund order 1042")
    page.open_thread()
    page.act_as("U_DANA")
    (refund,) = page.approval_cards(1)
    modal = page.open_modal(GRANT_DAY, refund, "Allow for 24 hours")
    assert "args.amount_cents <= 4999" in modal
    page.click("modal-submit")
    page.wait_for_text("thread", "issue_refund · ✅ Approved by @Dana")
    page.wait_for_text("thread", "🔓 @Dana allowed similar calls of issue_refund")

    page.act_as("U_RITA")
    page.send("/agent refund order 1044")
    open_thread(page, 2)
    page.wait_for_text("thread", "decided by grant:")
    page.wait_for_text("ledger-summary", "2 charges")

    page.act_as("U_DANA")
    open_thread(page, 1)
    page.click_last(f'#thread button[data-action-id="{REVOKE}"]')
    page.wait_for_text("thread", "🔒 Revoked by @Dana")
    grants = granting_stack.services.grants.list()
    assert [g.revoked_by.user_id for g in grants if g.revoked_by] == ["U_DANA"]

    page.act_as("U_RITA")
    page.send("/agent refund order 1044")
    open_thread(page, 3)
    page.act_as("U_DANA")
    assert len(page.approval_cards(1)) == 1
    page.click_in_thread(APPROVE, page.approval_cards(1)[0])
    page.wait_for_text("thread", "issue_refund · ✅ Approved by @Dana")


SMALL_REFUNDS = """\
rules:
  - id: small-refunds
    tool: issue_refund
    action: auto_approve
    reason: small refunds are fine
    when: [{field: args.amount_cents, op: "<=", value: 5000}]
"""


def test_a_rule_approves_a_small_refund_and_leaves_a_large_one_to_people(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """With a small-refunds rule, a 25.00 refund's card reads "decided by rule:small-refunds"
    and is charged with no click; a 129.00 refund still waits for a person."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(SMALL_REFUNDS, encoding="utf-8")
    with running_dev(tmp_path, SIGNOFF_RULES_FILE=str(rules)) as stack:
        page = SandboxPage.open(browser, stack.url)
        page.send("/agent refund order 1044")
        open_thread(page, 1)
        page.wait_for_text("thread", "issue_refund · ✅ Approved, decided by rule:small-refunds")
        page.wait_for_text("ledger-summary", "1 charge")
        page.send("/agent refund order 1043")
        open_thread(page, 2)
        page.act_as("U_DANA")
        (card,) = page.approval_cards(1)
        assert "decided by rule:" not in page.text_of("thread")
        page.click_in_thread(APPROVE, card)
        page.wait_for_text("thread", "issue_refund · ✅ Approved by @Dana")
        page.wait_for_text("ledger-summary", "2 charges")
