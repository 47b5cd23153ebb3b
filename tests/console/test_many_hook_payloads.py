"""A hook that takes 200 payloads (an ``async for`` over it), on every world: the run's JSON
carries its first 50 and last 10 (the small ones inline, at most 4 KiB each) and their count,
and the run page's timeline has a row for each of those, the last said as "payload 200 of
200", and one row for the 140 between them, which loads them when asked: then it has a row
for every one (test_hook_payload_pages.py takes a hook to thousands)."""

from __future__ import annotations

import wayline
from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_hook_payload_pages import HEAD, TAIL

COUNT = 200
CHARS = 4000  # under the 4 KiB a payload is sent with its hook: the largest kept inline


@wayline.workflow(name="many_hook_payloads.collect")
async def collect(order: str) -> int:
    seen = 0
    async for _ in wayline.create_hook(f"many_hook_payloads:{order}"):
        seen += 1
        if seen == COUNT:
            break
    return seen


async def test_a_hook_with_200_payloads_has_a_row_for_each_on_the_run_page(
    console: Console, page: Page
) -> None:
    client = console.engine.client
    async with console.engine.worker([collect]):
        handle = await client.start(collect, "m1")
        token = "many_hook_payloads:m1"
        await client.wait_for_hook(token, timeout=10)
        for n in range(COUNT):
            await client.resume_hook(token, {"n": n, "text": "x" * CHARS})
        assert await handle.result(timeout=60) == COUNT
    got = await console.http.get(f"/api/runs/{handle.run_id}")
    (hook,) = got.json()["hooks"]
    assert hook["payloadCount"] == COUNT
    assert [p["payload"]["n"] for p in hook["later"]] == list(range(1, HEAD))
    assert [p["payload"]["n"] for p in hook["lastPayloads"]] == list(range(COUNT - TAIL, COUNT))
    assert len(got.content) < 2 * (HEAD + TAIL) * CHARS  # 60 payloads once (247 KB), not 200
    rows = "#timeline tr[data-kind^='hook']"
    await page.open(f"/runs/{handle.run_id}")
    await page.text(f"{rows}[data-key='{hook['id']}#{COUNT}']", f"(payload {COUNT} of {COUNT})")
    await page.text(f"{rows}[data-key='{hook['id']}@{HEAD}']", f"{COUNT - HEAD - TAIL} more")
    await page.click(f"{rows}[data-key='{hook['id']}@{HEAD}'] button")
    await page.text(f"{rows}[data-key='{hook['id']}#{HEAD + 1}']", f"(payload {HEAD + 1} of")
    shown = await page.script(f'return document.querySelectorAll("{rows}").length')
    assert shown == COUNT
