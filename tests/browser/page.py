"""The sandbox page as a test drives it: act as someone, type, open threads, click, read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from selenium.common.exceptions import (
    ElementClickInterceptedException,
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT_S = 30.0
APPROVE = "approval.approve"
NOT_OPENED = "Slack did not open the dialog"
T = TypeVar("T")
RETRY = (NoSuchElementException, StaleElementReferenceException, ElementClickInterceptedException)


@dataclass
class SandboxPage:
    """A browser on the sandbox page."""

    driver: WebDriver

    @classmethod
    def open(cls, driver: WebDriver, url: str) -> SandboxPage:
        """Load the page and wait until it has drawn the channel."""
        driver.get(url)
        page = cls(driver)
        page.wait(lambda: page.driver.find_element(By.CSS_SELECTOR, "#channels .chan"))
        return page

    def wait(self, condition: Callable[[], T | None], timeout: float = WAIT_S, what: str = "") -> T:
        """Wait until ``condition()`` is truthy (re-trying while the page redraws)."""
        waiting = WebDriverWait(self.driver, timeout, poll_frequency=0.1, ignored_exceptions=RETRY)
        result = waiting.until(
            lambda _: condition(), message=what or "the page did not get there in time"
        )
        assert result is not None
        return result

    def act_as(self, user_id: str) -> None:
        """Switch the person the page acts as."""
        Select(self.driver.find_element(By.ID, "persona")).select_by_value(user_id)
        self.wait(
            lambda: (
                self.driver.find_element(By.TAG_NAME, "body").get_attribute("data-user") == user_id
            ),
            what=f"acting as {user_id}",
        )

    def send(self, text: str) -> None:
        """Type ``text`` into the composer and press Enter."""
        box = self.driver.find_element(By.ID, "composer-input")
        box.send_keys(text, Keys.ENTER)

    def text_of(self, element_id: str) -> str:
        """Return the visible text of the element with this id."""
        return str(self.driver.find_element(By.ID, element_id).text)

    def wait_for_text(self, element_id: str, text: str, timeout: float = WAIT_S) -> str:
        """Wait until the element shows ``text``; return all its text."""

        def shown() -> str | None:
            found = self.text_of(element_id)
            return found if text in found else None

        return self.wait(shown, timeout, what=f"{text!r} in #{element_id}")

    def open_thread(self) -> None:
        """Open the thread of the latest message that has replies."""
        self.wait(lambda: self._click_last(".replies-link"), what="a thread to open")
        self.wait(lambda: self.driver.find_element(By.ID, "thread").is_displayed())

    def approval_cards(self, count: int) -> list[str]:
        """Wait until the thread shows ``count`` pending cards; return their block ids."""
        selector = f'#thread button[data-action-id="{APPROVE}"]'

        def cards() -> list[str] | None:
            found = [
                str(b.get_attribute("data-block-id"))
                for b in self.driver.find_elements(By.CSS_SELECTOR, selector)
            ]
            return found if len(found) == count else None

        return self.wait(cards, what=f"{count} approval cards in the thread")

    def click_in_thread(self, action_id: str, block_id: str) -> None:
        """Click a card's button in the thread."""
        selector = f'#thread button[data-action-id="{action_id}"][data-block-id="{block_id}"]'
        self.wait(lambda: self._click_last(selector), what=f"{action_id} on {block_id}")

    def open_modal(self, action_id: str, block_id: str, text: str, tries: int = 3) -> str:
        """Click a card's button until the modal showing ``text`` opens; return its text.

        On a loaded machine a modal may come after the click's trigger expired (3 s, as on
        Slack): the clicker is then told to click again, and does, as a person would."""
        for _ in range(tries):
            told = self._told()
            self.click_in_thread(action_id, block_id)

            def answered(told: int = told) -> str | None:
                if text in self.text_of("modal-root"):
                    return "opened"
                return "again" if self._told() > told else None

            if self.wait(answered, what=f"{text!r} in a modal, or word to click again") == "opened":
                return self.text_of("modal-root")
        raise AssertionError(f"the modal with {text!r} did not open in {tries} clicks")

    def _told(self) -> int:
        """How many times the page has told the person that a dialog did not open."""
        return str(self.driver.find_element(By.TAG_NAME, "body").text).count(NOT_OPENED)

    def click_last(self, selector: str) -> None:
        """Click the last element matching a CSS selector, once the page shows one."""
        self.wait(lambda: self._click_last(selector), what=selector)

    def click(self, element_id: str) -> None:
        """Click the element with this id."""
        self.wait(lambda: self._click_last(f"#{element_id}"), what=f"#{element_id}")

    def _click_last(self, selector: str) -> bool:
        found = self.driver.find_elements(By.CSS_SELECTOR, selector)
        if not found:
            return False
        found[-1].click()
        return True
