"""A run of 5,000 steps opens in the browser without freezing it: the API sends its steps a
page at a time, and the run page keeps only the rows in view (and a margin) in the DOM."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.browser import Page
from tests.console.conftest import Console
from wayline._core.events import EventType, NewEvent
from wayline.world import World

STEPS = 5000
BATCH = 500
"""Steps appended per write: the log of a real loop of steps, written in a few seconds."""

MAX_ROWS = 300
"""The most step rows the page may hold at once: the view and its margins, far below 5,000."""


def step_name(i: int) -> str:
    return f"console.long_step_{i:04d}"


async def long_run(console: Console, steps: int = STEPS, result: Any = None) -> str:
    """A run of ``steps`` completed steps, written to the log as a worker would write them
    (created, started, completed), in batches: a worker would take minutes to run them. Each
    step's result is its position, or ``result`` when given."""
    client = console.engine.client
    handle = await client.start("console.long_run")  # no worker serves it: it stays running
    world: World = console.engine.world
    await world.append(handle.run_id, [NewEvent(EventType.RUN_STARTED)])
    for first in range(0, steps, BATCH):
        batch: list[NewEvent] = []
        for i in range(first, min(first + BATCH, steps)):
            cid = f"s{i + 1}"
            batch += [
                NewEvent(EventType.STEP_CREATED, cid, {"stepName": step_name(i), "occurrence": 0}),
                NewEvent(EventType.STEP_STARTED, cid, {"attempt": 1}),
                NewEvent(
                    EventType.STEP_COMPLETED, cid, {"result": i if result is None else result}
                ),
            ]
        await world.append(handle.run_id, batch)
    return handle.run_id


def step_rows(driver: WebDriver) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, '#timeline tr[data-kind="step"]'))


async def test_the_api_sends_a_long_run_s_steps_a_page_at_a_time(console: Console) -> None:
    run_id = await long_run(console, 450)
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    assert (len(run["steps"]), run["stepCount"]) == (200, 450)
    names = [s["name"] for s in run["steps"]]
    cursor = run["nextStepCursor"]
    while cursor is not None:
        page = (await console.http.get(f"/api/runs/{run_id}/steps?after={cursor}&limit=200")).json()
        names += [s["name"] for s in page["steps"]]
        cursor = page["nextCursor"]
    assert names == [step_name(i) for i in range(450)]
    refused = await console.http.get(f"/api/runs/{run_id}/steps?after=bogus")
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "BAD_REQUEST")


async def test_a_large_step_result_is_left_to_the_run_s_events(console: Console) -> None:
    large = "x" * 10_000
    run_id = await long_run(console, 1, result=large)
    (step,) = (await console.http.get(f"/api/runs/{run_id}")).json()["steps"]
    assert (step["result"], step["resultBytes"]) == (None, len(large) + 2)  # its JSON quotes
    events = (await console.http.get(f"/api/runs/{run_id}/events")).json()["events"]
    assert events[-1]["data"]["result"] == large  # nothing is lost: the log keeps it whole


async def test_a_run_of_5000_steps_opens_without_freezing_the_page(
    console: Console, page: Page
) -> None:
    run_id = await long_run(console)
    await page.open(f"/runs/{run_id}")
    await page.text("#timeline-count", f"({STEPS} entries)")
    last = f'#timeline tr[data-key="{step_name(STEPS - 1)}"]'
    # every step is loaded (the count says so) yet only a window of rows is drawn
    assert 0 < await page.until(step_rows, "step rows") < MAX_ROWS
    # the page answers a click: the cancel, made without the token, is refused in words
    await page.click("#cancel")
    await page.text("#said", "token")
    await page.script(
        "const box = document.getElementById('timeline-box'); box.scrollTop = box.scrollHeight"
    )
    await page.text(last, step_name(STEPS - 1))
    rows: Any = await page.until(step_rows, "step rows after the scroll")
    assert rows < MAX_ROWS
    await page.screenshot("run-long.png")
