"""The console's pages in a real browser (headless Chromium), on every world: the runs page
and its counts, a run whose step completes while the page is open, the workers and schedules
pages, and a run cancelled from its page (typed hooks' forms: test_hook_forms.py). Each
page's screenshot is what docs/console.md shows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.console import flows
from tests.console.browser import Page
from tests.console.conftest import TOKEN, Console
from tests.runtime.harness import wait_for
from wayline.cli import main


async def test_the_runs_page_and_a_step_that_completes_while_it_is_watched(
    console: Console, page: Page, tmp_path: Path
) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.greet, flows.gated]):
        done = await client.start(flows.greet, "ana")
        await done.result(timeout=10)
        gated = await client.start(flows.gated, "order-1")

        await page.open("/")
        await page.text(f'tr[data-run-id="{done.run_id}"] .status', "completed")
        await page.text(f'tr[data-run-id="{gated.run_id}"] .status', "running")
        await page.text("#counts button", "completed 1")
        await page.screenshot("runs.png")

        await page.click(f'tr[data-run-id="{gated.run_id}"] a')
        await page.text('#timeline tr[data-key="console.wait_for_release"] .status', "running")
        await page.script("window.stillTheSamePage = true")
        await page.screenshot("run-running.png")
        flows.release("order-1")
        # the page learns of it over its change feed: no reload (the mark set above stays)
        await page.text('#timeline tr[data-key="console.wait_for_release"] .status', "completed")
        await page.text("#status", "completed")
        assert await page.script("return window.stillTheSamePage") is True
        await page.text("#story", 'result    "released"')
        await page.screenshot("run-completed.png")

        orphan = await client.start("naps")  # no worker here serves naps
        await page.open("/workers")
        await page.text('#served tr[data-workflow="gated"]', "live")
        await page.text(f'#waiting tr[data-run-id="{orphan.run_id}"]', "naps")
        await page.text('#queues tr[data-topic="flow:w:naps"]', "1")  # nobody takes it
        await page.screenshot("workers.png")

    nowhere = f"sqlite:///{tmp_path / 'none.db'}"  # the add's "no worker" look finds no world
    added = ["schedules", "add", "nightly", "--cron", "0 2 * * *", "--workflow", "greet"]
    file = "schedules.json"  # the page fixture's, in the test's folder
    assert await asyncio.to_thread(main, [*added, "--file", file, "--world", nowhere]) == 0
    await page.open("/schedules")
    await page.text('#schedules tr[data-name="nightly"]', "T02:00:00Z")
    await page.screenshot("schedules.png")
    await page.type("#token", TOKEN + "\t")  # the tab ends the field: the page keeps it
    await page.click('#schedules tr[data-name="nightly"] button.suspend')
    await page.text('#schedules tr[data-name="nightly"]', "suspended")
    await page.click('#schedules tr[data-name="nightly"] button.resume')
    await page.text('#schedules tr[data-name="nightly"]', "T02:00:00Z")


async def test_a_run_cancelled_from_its_page(console: Console, page: Page) -> None:
    client = console.engine.client
    async with console.engine.worker([flows.naps]):
        sleeper = await client.start(flows.naps)

        await page.open(f"/runs/{sleeper.run_id}")
        await page.type("#token", TOKEN + "\t")  # the tab ends the field: the page keeps it
        await page.text('#timeline tr[data-kind="sleep"] .status', "waiting")
        await page.click("#cancel")
        await page.text("#status", "cancelled")
        await page.screenshot("run-cancelled.png")

        async def cancelled() -> bool:
            return str((await client.get_run(sleeper.run_id)).status) == "cancelled"

        assert await wait_for(cancelled)
