"""A console deployed where more than its users reach it (a pod behind a Service): with
``reads_need_token`` every API request needs the bearer token, ``read_only`` refuses actions
even with it, and ``/healthz`` answers the pod's probes without one; in a browser, the pages
ask for the token and read the live feed with it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.conftest import AUTH, TOKEN, Console, served_page
from wayline.cli.console import create_app


@asynccontextmanager
async def _served(console: Console, **options: bool) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(console.engine.client, world_url="test://world", token=TOKEN, **options)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


async def test_reads_need_the_token_when_asked_and_health_never_does(console: Console) -> None:
    run_id = (await console.engine.client.start("read-token-nobody-serves")).run_id
    async with _served(console, reads_need_token=True, read_only=True) as http:
        for path in ("/api/runs", f"/api/runs/{run_id}", "/api/info", "/api/hooks"):
            refused = await http.get(path)
            assert refused.status_code == 401, path
            assert refused.json()["error"]["code"] == "UNAUTHORIZED"
            wrong = await http.get(path, headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 401, path
        listed = await http.get("/api/runs", headers=AUTH)
        assert listed.status_code == 200
        assert [r["runId"] for r in listed.json()["runs"]] == [run_id]
        health = await http.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok\n")


async def test_a_read_only_console_refuses_actions_even_with_the_token(console: Console) -> None:
    run_id = (await console.engine.client.start("read-token-nobody-serves")).run_id
    async with _served(console, read_only=True) as http:
        assert (await http.get("/api/info")).json()["readOnly"] is True
        answer = await http.post(f"/api/runs/{run_id}/cancel", headers=AUTH)
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "READ_ONLY"
        # reads stay open unless asked otherwise, and the run was left as it was
        assert (await http.get(f"/api/runs/{run_id}")).json()["status"] == "pending"


async def test_the_pages_ask_for_the_token_and_follow_the_live_feed_with_it(
    console: Console, chromium: WebDriver, tmp_path: Path
) -> None:
    client = console.engine.client
    first = (await client.start("read-token-nobody-serves")).run_id
    async with served_page(console, chromium, tmp_path, reads_need_token=True) as page:
        await page.open("/")
        await page.text("#message", "needs its bearer token")
        await page.type("#token", TOKEN + "\n")  # the page is drawn again with it
        await page.text(f'tr[data-run-id="{first}"] .status', "pending")
        await page.script("window.stillTheSamePage = true")
        # the change feed, read with the token, brings a new run in without a reload
        second = (await client.start("read-token-nobody-serves")).run_id
        await page.text(f'tr[data-run-id="{second}"] .status', "pending")
        assert await page.script("return window.stillTheSamePage") is True


async def test_a_console_on_a_port_an_earlier_one_had_finds_no_token_left(
    console: Console, chromium: WebDriver, tmp_path: Path
) -> None:
    """The suite's one browser tab keeps an origin's ``sessionStorage`` across pages: a token
    typed for a console on a port must be gone when another console takes that port, or a
    later test's action "made without the token" is taken with the earlier one's."""
    async with served_page(console, chromium, tmp_path) as first:
        await first.open("/")
        await asyncio.to_thread(
            chromium.execute_script, "sessionStorage.setItem('wayline-token', arguments[0])", TOKEN
        )
        port = int(first.base.rsplit(":", 1)[1])
    async with served_page(console, chromium, tmp_path, port=port) as second:
        await second.open("/")
        left = await asyncio.to_thread(
            chromium.execute_script, "return sessionStorage.getItem('wayline-token')"
        )
    assert left is None, "the earlier console's token was still stored for the port"
