"""The console's app over the parametrised world, called in-process (httpx's ASGI transport on
the test's own event loop, where the world's connections live), and served over HTTP to one
headless Chromium for the browser tests."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.remote.webdriver import WebDriver

import wayline
from tests.conftest import require_all_components
from tests.console.browser import Page, missing, open_chromium
from tests.runtime.harness import Engine
from wayline.cli.console import create_app, server

TOKEN = "console-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Console:
    engine: Engine
    http: httpx.AsyncClient


@pytest.fixture
async def console(engine: Engine) -> AsyncIterator[Console]:
    app = create_app(engine.client, world_url="test://world", token=TOKEN, poll_seconds=0.05)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield Console(engine, http)


@asynccontextmanager
async def fresh_console(engine: Engine, **world_options: int) -> AsyncIterator[httpx.AsyncClient]:
    """A console over a world of its own (made with ``world_options``), as a console process
    started now would be: nothing read before is cached. Its reads need no token."""
    fresh = await engine.make_world(**world_options)
    app = create_app(wayline.Client(fresh), world_url="test://world")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


@pytest.fixture(scope="session")
def chromium() -> Iterator[WebDriver]:
    """One headless Chromium for the whole session. Missing: a failure where every component
    is required (CI), else a skip that names what to install."""
    absent = missing()
    if absent is not None:
        if require_all_components():
            pytest.fail(absent, pytrace=False)
        pytest.skip(absent)
    driver = open_chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
async def page(
    console: Console, chromium: WebDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Page]:
    """The console served over HTTP on 127.0.0.1 (uvicorn, on the test's loop), with the
    session's browser pointed at it; every live feed ends before the server stops. Its
    schedules file is ``schedules.json`` in the test's folder, named as a person would give
    it (relative), so the page and its screenshot show no path of the machine."""
    monkeypatch.chdir(tmp_path)
    async with served_page(console, chromium, tmp_path) as opened:
        yield opened


@asynccontextmanager
async def served_page(
    console: Console, chromium: WebDriver, shots: Path, *, port: int = 0, **options: bool
) -> AsyncIterator[Page]:
    """:func:`page`'s server, with ``options`` for :func:`create_app` (``reads_need_token``),
    on ``port`` (0: one the system picks)."""
    closing = asyncio.Event()
    app = create_app(
        console.engine.client,
        world_url="test://world",
        token=TOKEN,
        poll_seconds=0.1,
        closing=closing,
        schedules_file=Path("schedules.json"),
        **options,
    )
    sock = socket.create_server(("127.0.0.1", port))
    running = server(app)
    task = asyncio.create_task(running.serve(sockets=[sock]), name="console-under-test")
    try:
        while not running.started:
            if task.done():
                task.result()  # the server could not start: say why
            await asyncio.sleep(0.01)
        yield Page(chromium, f"http://127.0.0.1:{sock.getsockname()[1]}", shots)
    finally:
        # leave the pages first: a browser holding a live feed would hold the shutdown up
        await asyncio.to_thread(_leave, chromium)
        closing.set()
        running.should_exit = True
        await task
        sock.close()


def _leave(chromium: WebDriver) -> None:
    """Forget what the page stored (the token a test typed is in ``sessionStorage``), then
    leave it. The session's one tab keeps an origin's storage across pages, and a later test's
    console bound to a port an earlier one had (the same origin) found that token: its cancel
    "made without the token" was taken (``#said`` showed 'cancel asked', a CI run)."""
    try:
        chromium.execute_script("sessionStorage.clear(); localStorage.clear();")
    except WebDriverException:  # no page of the console's open (an alert, a page that failed)
        pass
    chromium.get("about:blank")
