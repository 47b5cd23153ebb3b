"""The run page keeps the hooks it drew when they leave the run's JSON (static/run.js), and
it keeps their status current: a hook past the run's first 50 that waited (the JSON carried
it for its form) and then took its payload is no longer carried, and the page must not go on
drawing it as waiting; nor a kept hook the run's end disposed of (docs/console.md, "Runs with
many hooks"). In headless Chromium, on every world."""

from __future__ import annotations

import wayline
from tests.console.browser import Page
from tests.console.conftest import Console

HEAD_HOOKS, TAIL_HOOKS = 50, 10  # the hooks the run's JSON carries (docs/console.md)
MADE = HEAD_HOOKS + 1 + TAIL_HOOKS + 20  # hook 50 waits in the middle, 20 more after it
PREFIX = "kept_hook_status"


@wayline.workflow(name="kept_hook_status.many")
async def many(order: str) -> str:
    hooks = [wayline.create_hook(f"{PREFIX}:{order}:{i}") for i in range(MADE)]
    return str(await hooks[0])


async def test_a_kept_hook_that_took_its_payload_is_not_drawn_as_waiting(
    console: Console, page: Page
) -> None:
    client = console.engine.client
    order = "k1"
    async with console.engine.worker([many]):
        handle = await client.start(many, order)
        await client.wait_for_hook(f"{PREFIX}:{order}:{MADE - 1}", timeout=60)
    run = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    middle = next(h for h in run["hooks"] if h["n"] == HEAD_HOOKS)
    assert middle["status"] == "waiting"  # carried for its form: it waits past the first 50
    row = f"#timeline tr[data-key='{middle['id']}']"
    await page.open(f"/runs/{handle.run_id}")
    await page.text(row, "waiting")

    await client.resume_hook(middle["token"], {"answer": "yes"})
    now = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    assert middle["id"] not in [h["id"] for h in now["hooks"]]  # no longer carried
    await page.text(row, "received")

    # the run's end disposes of the hooks that still wait, kept ones included
    later = next(h for h in now["hooks"] if h["n"] > HEAD_HOOKS and h["status"] == "waiting")
    await page.text(f"#timeline tr[data-key='{later['id']}']", "waiting")
    await client.terminate(handle.run_id, "enough hooks")
    await page.text(f"#timeline tr[data-key='{later['id']}']", "disposed")
