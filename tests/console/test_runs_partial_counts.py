"""The runs page in a real browser while a NATS console loads its runs and its server does not
count the runs index (``RunsIndex.count``, refused here): the counts show with a "+" while they
are partial, are read again until they are exact, then show without it, and
the page stops reading them again; a read that fails meanwhile is tried again, later each
time, instead of leaving the "+" for good."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

import wayline
from tests.console.conftest import Console, served_page
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import runs_index, runs_model

_WF = "partial-counts-browser-wf"


def _uncountable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server does not answer the index's counts: the counts while the model loads are
    those of the runs it has read so far, partial."""

    async def refused(index: Any, pattern: str) -> int:
        raise WorldUnavailableError("no answer to a count (a test)")

    monkeypatch.setattr(runs_index.RunsIndex, "count", refused)


def _counts(driver: WebDriver) -> str:
    return " ".join(str(b.text) for b in driver.find_elements(By.CSS_SELECTOR, "#counts button"))


async def test_the_plus_of_partial_counts_shows_then_goes_once_they_are_exact(
    open_nats_world: OpenWorlds,
    chromium: WebDriver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = await open_nats_world()
    for i in range(6):
        created = NewEvent(EventType.RUN_CREATED, data={"workflow": _WF, "input": [i]})
        await writer.append(new_run_id(), [created], expected_seq=0)
    assert await writer.flush_runs_index()

    loaded = asyncio.Event()  # the console's runs model loads only once this is set
    read = runs_model.RunsModel._read

    async def held(model: Any, start: int, batch: int) -> list[Any]:
        await loaded.wait()
        return await read(model, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", held)
    _uncountable(monkeypatch)
    world = await open_nats_world()
    calls = {"pages": 0, "failing": 0}
    runs_page = world.runs_page

    async def counted(**chosen: Any) -> Any:
        calls["pages"] += 1
        if calls["failing"]:
            calls["failing"] -= 1
            raise WorldUnavailableError("the server is away for a moment (a test)")
        return await runs_page(**chosen)

    monkeypatch.setattr(world, "runs_page", counted)
    console = Console(SimpleNamespace(client=wayline.Client(world)), None)  # type: ignore[arg-type]
    async with served_page(console, chromium, tmp_path) as page:
        await page.open("/")
        await page.until(lambda d: "+" in _counts(d) and _counts(d), 'counts with a "+"')
        assert world.runs_loading()
        # two reads in a row fail while the counts are partial: the page asks again anyway
        calls["failing"] = 2
        await page.until(lambda d: calls["failing"] == 0, "a read after the failed ones")
        loaded.set()
        assert await world.runs_followed(30.0) is not None
        shown = await page.until(
            lambda d: (t := _counts(d)) and "+" not in t and t, 'the counts without a "+"'
        )
        assert shown.startswith("all 6")
        # exact counts are not read again: the page stops asking
        asked = calls["pages"]
        await asyncio.sleep(2.5)
        assert calls["pages"] == asked


async def test_older_runs_asked_for_while_the_counts_are_read_again_stay_shown(
    open_nats_world: OpenWorlds,
    chromium: WebDriver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first page read again for its partial counts and answered after the user asked for
    older runs does not replace the rows: the older runs stay shown."""
    writer = await open_nats_world()
    for i in range(55):  # a page of 50 and 5 older runs
        created = NewEvent(EventType.RUN_CREATED, data={"workflow": _WF + "-older", "input": [i]})
        await writer.append(new_run_id(), [created], expected_seq=0)
    assert await writer.flush_runs_index()
    read = runs_model.RunsModel._read
    never = asyncio.Event()  # the console's runs model stays loading: the counts stay partial

    async def held(model: Any, start: int, batch: int) -> list[Any]:
        await never.wait()
        return await read(model, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", held)
    _uncountable(monkeypatch)
    world = await open_nats_world()
    runs_page = world.runs_page
    hold_first = {"on": False}
    holding, let_go, answered = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def gated(**chosen: Any) -> Any:
        if hold_first["on"] and chosen.get("after") is None:
            hold_first["on"] = False
            holding.set()
            await let_go.wait()
            try:
                return await runs_page(**chosen)
            finally:
                answered.set()
        return await runs_page(**chosen)

    monkeypatch.setattr(world, "runs_page", gated)
    console = Console(SimpleNamespace(client=wayline.Client(world)), None)  # type: ignore[arg-type]

    def rows(driver: WebDriver) -> int:
        return len(driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr"))

    async with served_page(console, chromium, tmp_path) as page:
        await page.open("/")
        await page.until(lambda d: "+" in _counts(d) and rows(d) == 50, "50 runs, counts with +")
        hold_first["on"] = True  # the next reading of the first page waits in the server
        await asyncio.wait_for(holding.wait(), 30.0)
        await page.click("#more")
        await page.until(lambda d: rows(d) == 55, "the older runs")
        let_go.set()
        await asyncio.wait_for(answered.wait(), 30.0)
        await asyncio.sleep(1.5)  # the late answer lands, and a reading it would start
        assert await asyncio.to_thread(rows, page.driver) == 55, "the older runs were replaced"
