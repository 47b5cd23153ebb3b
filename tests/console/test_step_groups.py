"""A step a workflow calls in a loop is one group in the run's timeline: the API counts each
repeated name's occurrences by status (``stepGroups``) and pages them (``?group=``), and the run
page shows one row for the group that opens to its occurrences."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.step_logs import append_steps, unserved_run

CHARGE = "step_groups.charge"


async def charged_run(console: Console, workflow: str) -> str:
    """A loop of six charges (four completed, one failed, one running), each followed by a
    receipt that runs once, and one step before the loop."""
    client, world = console.engine.client, console.engine.world
    run_id = await unserved_run(client, workflow)
    statuses = ["completed", "completed", "failed", "completed", "completed", "running"]
    steps = [("s0", "step_groups.prepare", 0, "completed")]
    for i, status in enumerate(statuses):
        steps.append((f"c{i}", CHARGE, i, status))
    steps.append(("r0", "step_groups.receipt", 0, "completed"))
    await append_steps(world, run_id, steps)
    return run_id


async def test_the_api_counts_and_pages_a_repeated_step(console: Console) -> None:
    run_id = await charged_run(console, "step_groups.api")
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    assert run["stepGroups"] == [
        {
            "name": CHARGE,
            "count": 6,
            "first": 1,
            "statuses": {"completed": 4, "failed": 1, "running": 1},
        }
    ]
    first = (await console.http.get(f"/api/runs/{run_id}/steps?group={CHARGE}&limit=4")).json()
    assert (first["stepCount"], first["nextCursor"]) == (6, "4")
    rest = (
        await console.http.get(f"/api/runs/{run_id}/steps?group={CHARGE}&after=4&limit=4")
    ).json()
    assert rest["nextCursor"] is None
    ids = [s["id"] for s in first["steps"] + rest["steps"]]
    assert ids == [f"c{i}" for i in range(6)]
    none = (await console.http.get(f"/api/runs/{run_id}/steps?group=step_groups.nothing")).json()
    assert (none["steps"], none["stepCount"], none["nextCursor"]) == ([], 0, None)


def occurrence_rows(driver: WebDriver) -> int:
    css = f'#timeline tr[data-kind="step"][data-key^="{CHARGE}#"]'
    return len(driver.find_elements(By.CSS_SELECTOR, css))


async def test_the_run_page_shows_a_group_that_opens_to_its_occurrences(
    console: Console, page: Page
) -> None:
    run_id = await charged_run(console, "step_groups.page")
    await page.open(f"/runs/{run_id}")
    group = f'#timeline tr[data-kind="group"][data-key="{CHARGE}"]'
    said = await page.text(group, f"{CHARGE} \N{MULTIPLICATION SIGN}6")
    assert "4 completed, 1 failed, 1 running" in said
    assert await page.until(lambda d: occurrence_rows(d) == 0 or None, "a closed group") is True
    await page.text('#timeline tr[data-key="step_groups.receipt"]', "step_groups.receipt")
    await page.click(f"{group} button.expand")
    assert await page.until(lambda d: occurrence_rows(d) == 6 or None, "six occurrences")
    await page.click(f"{group} button.expand")
    assert await page.until(lambda d: occurrence_rows(d) == 0 or None, "the group closed again")


async def test_an_open_group_of_hundreds_is_virtualised(console: Console, page: Page) -> None:
    client, world = console.engine.client, console.engine.world
    run_id = await unserved_run(client, "step_groups.many")
    statuses = ["completed"] * 498 + ["failed", "running"]
    await append_steps(
        world, run_id, [(f"m{i}", CHARGE, i, status) for i, status in enumerate(statuses)]
    )
    await page.open(f"/runs/{run_id}")
    group = f'#timeline tr[data-kind="group"][data-key="{CHARGE}"]'
    said = await page.text(group, f"{CHARGE} \N{MULTIPLICATION SIGN}500")
    assert "498 completed, 1 failed, 1 running" in said
    await page.screenshot("run-step-group.png")  # docs/console.md, "Long runs"
    await page.click(f"{group} button.expand")
    # the group row and its 500 occurrences are entries, yet only a window of them is drawn
    await page.text("#timeline-count", "(501 entries)")
    drawn = await page.until(lambda d: occurrence_rows(d) or None, "occurrence rows")
    assert drawn < 200
    await page.script(
        "const box = document.getElementById('timeline-box'); box.scrollTop = box.scrollHeight"
    )
    await page.text(f'#timeline tr[data-key="{CHARGE}#500"]', CHARGE)
