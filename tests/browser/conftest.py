"""Fixtures for the browser tests: a ``signoff dev`` stack and a headless Chromium on it.

The browser is Debian's ``chromium`` driven by Selenium through Debian's ``chromedriver``
(``apt-get install chromium chromium-driver``); nothing is downloaded.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from devkit.dev import DevStack
from tests.browser.page import SandboxPage
from tests.browser.stacks import running_dev

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1440,900",
)


@pytest.fixture
def dev_stack(tmp_path: Path) -> Iterator[DevStack]:
    """The ``signoff dev`` stack with its default settings."""
    with running_dev(tmp_path) as stack:
        yield stack


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile, closed after the test."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="signoff-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: webdriver.Chrome, dev_stack: DevStack) -> SandboxPage:
    """The sandbox page of ``dev_stack``, open in ``browser``, acting as the requester."""
    return SandboxPage.open(browser, dev_stack.url)
