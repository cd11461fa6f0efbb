"""The sandbox page's Home tab in a real headless Chromium: what waits on the person looking,
decided there as on the card."""

from __future__ import annotations

from selenium.webdriver.common.by import By

from tests.browser.page import APPROVE, SandboxPage

TASK = "/agent refund order 1042 and email the customer"
HOME = '#channels button[data-home="1"]'
HOME_APPROVE = f'#messages [data-home] button[data-action-id="{APPROVE}"]'


def _home_cards(page: SandboxPage) -> list[str]:
    """The block ids of the Approve buttons on the Home tab shown now."""
    found = page.driver.find_elements(By.CSS_SELECTOR, HOME_APPROVE)
    return [str(b.get_attribute("data-block-id")) for b in found]


def _click_first_channel(page: SandboxPage) -> bool:
    """Click the first channel in the sidebar (the one the run was started in)."""
    page.driver.find_elements(By.CSS_SELECTOR, "#channels button[data-channel]")[0].click()
    return True


def test_danas_home_shows_the_refund_and_approves_it(page: SandboxPage) -> None:
    """Rita's run waits on Dana (the thread's status says so): only Dana's Home tab shows the
    refund's card; Approve there decides it, the tab is published again without it, and the
    thread's card says so."""
    page.send(TASK)
    page.wait_for_text("messages", "Started run")
    page.open_thread()
    page.approval_cards(1)  # the tab shows what is asked when it is opened
    page.wait_for_text("thread", "is waiting for a sign-off on issue_refund")
    page.click_last(HOME)
    page.wait_for_text("messages", "Your recent runs")
    assert _home_cards(page) == [], "Rita asked; she may not decide"
    page.act_as("U_DANA")
    page.click_last(HOME)
    (refund,) = page.wait(lambda: _home_cards(page) or None, what="the refund on Dana's Home")
    assert "Approval needed: issue_refund" in page.text_of("messages")
    page.click_last(f'{HOME_APPROVE}[data-block-id="{refund}"]')
    # published again: without the refund (with the email's card if it was asked by then)
    page.wait(lambda: refund not in _home_cards(page), what="the refund gone from Home")
    page.wait_for_text("messages", "Your recent runs")
    page.wait(lambda: _click_first_channel(page), what="the channel")
    page.open_thread()
    page.wait_for_text("thread", "issue_refund · ✅ Approved by @Dana")
