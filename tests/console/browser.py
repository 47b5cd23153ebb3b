"""A real browser for the console's tests: Debian's headless Chromium under its chromedriver
(``make browser`` installs both), driven by Selenium. Selenium's calls block, so each runs in a
thread while the test's event loop goes on serving the console and running the worker."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

WAIT_SECONDS = 15.0
"""The longest a page is given to show what a test waits for (a shared machine under load)."""

SCREENSHOTS = os.environ.get("WAYLINE_CONSOLE_SCREENSHOTS")
"""Where the tests also save their screenshots (docs/console to refresh the docs' pictures)."""


def missing() -> str | None:
    """What is missing for a browser test, or None when both binaries are found."""
    absent = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    return None if not absent else f"{' and '.join(absent)} not found (make browser)"


def open_chromium() -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    # --no-sandbox: the suite may run as root in a container, where Chromium's sandbox cannot
    # start; the pages it opens are the test's own.
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,900")
    service = Service(executable_path=str(shutil.which("chromedriver")))
    return webdriver.Chrome(options=options, service=service)


class Page:
    """The browser, seen from an async test."""

    def __init__(self, driver: WebDriver, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots

    async def open(self, path: str) -> None:
        await asyncio.to_thread(self.driver.get, self.base + path)

    async def until(self, check: Callable[[WebDriver], Any], what: str) -> Any:
        """Wait (bounded) until ``check`` gives something truthy; a failure names ``what``."""

        def wait() -> Any:
            # an element the page redrew between finding and reading it is looked for again
            waiting = WebDriverWait(
                self.driver,
                WAIT_SECONDS,
                poll_frequency=0.05,
                ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
            )
            return waiting.until(check, f"the page never showed {what}")

        return await asyncio.to_thread(wait)

    async def text(self, css: str, contains: str) -> str:
        seen: list[str] = []

        def check(driver: WebDriver) -> str | None:
            seen[:] = [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)]
            return next((text for text in seen if contains in text), None)

        try:
            found: str = await self.until(check, f"{contains!r} in {css}")
        except TimeoutException:
            raise AssertionError(f"{css} never showed {contains!r}; it shows {seen}") from None
        return found

    async def act(self, css: str, action: Callable[[WebElement], None], what: str) -> None:
        """Find the element and act on it in one go, again if the page redrew it in between
        (a live page replaces its rows when the feed says something changed)."""

        def check(driver: WebDriver) -> bool:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            if not found or not found[0].is_enabled():
                return False
            action(found[0])
            return True

        await self.until(check, f"{css} to {what}")

    async def click(self, css: str) -> None:
        await self.act(css, lambda element: element.click(), "click")

    async def type(self, css: str, text: str) -> None:
        def typing(element: WebElement) -> None:
            element.clear()
            element.send_keys(text)

        await self.act(css, typing, "type in")

    async def script(self, source: str) -> Any:
        return await asyncio.to_thread(self.driver.execute_script, source)

    async def screenshot(self, name: str) -> None:
        def save() -> None:
            assert self.driver.save_screenshot(str(self.shots / name)), name
            if SCREENSHOTS:
                Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
                shutil.copy(self.shots / name, Path(SCREENSHOTS) / name)

        await asyncio.to_thread(save)
