"""The run page's change feed (``/api/live?run=``) polls a run by reading only the events after
the last it saw, so a run of thousands of steps is not read whole at every poll."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.conftest import Console, served_page
from tests.console.test_long_run import long_run

POLLS = 4
"""How many of the feed's messages are read: its first look, then some polls of 0.1 s."""


async def test_the_live_feed_of_a_run_reads_only_its_new_events(
    console: Console, chromium: WebDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await long_run(console, 50)
    world = console.engine.world
    reads: list[int] = []
    listed = world.list_events

    async def list_events(read_run: str, after_seq: int = 0) -> Any:
        if read_run == run_id:
            reads.append(after_seq)
        return await listed(read_run, after_seq)

    monkeypatch.setattr(world, "list_events", list_events)
    async with (
        served_page(console, chromium, tmp_path) as page,
        httpx.AsyncClient(base_url=page.base, timeout=10) as http,
        http.stream("GET", f"/api/live?run={run_id}") as feed,
    ):
        messages = 0
        async for line in feed.aiter_lines():
            messages += line == ""  # a blank line ends each message
            if messages == POLLS:
                break
    assert len(reads) >= POLLS - 1
    # the first look reads the log from its start, every later poll after its last event
    assert reads[0] == 0
    assert set(reads[1:]) == {50 * 3 + 2}  # the run's created and started, 3 per step
