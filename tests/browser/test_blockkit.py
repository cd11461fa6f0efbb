"""Block Kit on the sandbox page: what the bot may post is drawn as Slack draws it, safely."""

from __future__ import annotations

import time
from typing import Any

from selenium.webdriver.common.by import By

from bot.app.slack_mode import web_client
from devkit.dev import DevStack
from tests.browser.page import SandboxPage

BLOCKS: list[dict[str, Any]] = [
    {"type": "header", "text": {"type": "plain_text", "text": "Refunds <today>"}},
    {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Bold* and `code` for <@U_DANA>\n&lt;i&gt;x&lt;/i&gt;"},
        "fields": [
            {"type": "mrkdwn", "text": "*Amount*\n49.99"},
            {"type": "plain_text", "text": "Order 1042"},
        ],
    },
    {"type": "divider"},
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "context line"}]},
    {"type": "image", "image_url": "https://example.invalid/chart.png", "alt_text": "a chart"},
    {
        "type": "actions",
        "block_id": "demo",
        "elements": [
            {
                "type": "button",
                "action_id": "demo.delete",
                "value": "1",
                "style": "danger",
                "text": {"type": "plain_text", "text": "Delete"},
                "confirm": {
                    "title": {"type": "plain_text", "text": "Sure?"},
                    "text": {"type": "mrkdwn", "text": "This *cannot* be undone."},
                    "confirm": {"type": "plain_text", "text": "Delete it"},
                    "deny": {"type": "plain_text", "text": "Keep it"},
                },
            }
        ],
    },
]


def test_blocks_are_drawn_and_a_confirm_dialog_guards_the_click(
    page: SandboxPage, dev_stack: DevStack
) -> None:
    """Header, section fields, mrkdwn, divider, context, image, danger button with confirm."""
    channel = dev_stack.workspace.channels()[0].id
    web_client(dev_stack.settings).chat_postMessage(channel=channel, text="fallback", blocks=BLOCKS)
    find = page.driver.find_element
    page.wait(lambda: find(By.CSS_SELECTOR, ".b-header"))
    assert find(By.CSS_SELECTOR, ".b-header").text == "Refunds <today>"
    text = find(By.CSS_SELECTOR, ".b-section .b-text")
    assert text.find_element(By.TAG_NAME, "b").text == "Bold"
    assert text.find_element(By.TAG_NAME, "code").text == "code"
    assert text.find_element(By.CSS_SELECTOR, ".mention").text == "@Dana"
    assert "<i>x</i>" in text.text
    assert not text.find_elements(By.TAG_NAME, "i")
    assert len(page.driver.find_elements(By.CSS_SELECTOR, ".b-field")) == 2
    assert page.driver.find_elements(By.CSS_SELECTOR, "hr.b-divider")
    assert find(By.CSS_SELECTOR, ".b-context").text == "context line"
    assert "a chart" in find(By.CSS_SELECTOR, ".b-image").text
    assert not page.driver.find_elements(By.CSS_SELECTOR, ".b-image img")
    button = find(By.CSS_SELECTOR, 'button[data-action-id="demo.delete"]')
    assert "btn-danger" in str(button.get_attribute("class"))
    button.click()
    assert "This cannot be undone." in page.wait_for_text("confirm-root", "Keep it")
    page.click("confirm-no")
    time.sleep(1.0)
    assert not find(By.ID, "toast").is_displayed()
    find(By.CSS_SELECTOR, 'button[data-action-id="demo.delete"]').click()
    page.click("confirm-yes")
    assert "did not acknowledge" in page.wait_for_text("toast", "HTTP 404")
