"""A hook resumed thousands of times (a stream-like hook, an ``async for`` over it), on every
world: the run's JSON carries its first and last payloads and their count, not every payload,
so its size does not grow with them; ``/hooks/{hook}/payloads`` walks every payload once and in
order, also while more arrive; a bad cursor or limit is a typed 400; and the run page shows the
count, loads the payloads it lacks when asked and shows a payload that came after it opened
(docs/console.md, "Hooks with many payloads")."""

from __future__ import annotations

from typing import Any

import wayline
from tests.console.browser import Page
from tests.console.conftest import Console
from wayline._core.events import EventType, NewEvent

COUNT = 5000
TEXT = "y" * 200  # some 230 bytes a payload: 5,000 of them are over a megabyte of JSON
HEAD, TAIL = 50, 10  # the payloads the run's JSON carries of a hook (docs/console.md)


@wayline.workflow(name="hook_payload_pages.follow")
async def follow(order: str) -> int:
    seen = 0
    async for _ in wayline.create_hook(f"hook_payload_pages:{order}"):
        seen += 1
    return seen


BATCH = 250
"""The payloads written to the log in one append."""


async def _resumed(console: Console, order: str, count: int) -> tuple[str, str]:
    """A run whose hook received ``count`` payloads ``{"n": 0..., "text"}``. The worker stops
    once the hook is made, and the payloads are appended to the log as ``resume_hook`` writes
    them (``hook_received``), a batch at a time: a resume reads the run's log, so thousands of
    them one by one would make the test minutes long. The console folds the log as stored,
    whether a worker took the payloads yet or not; the tests' late payloads go through
    ``resume_hook`` itself."""
    client = console.engine.client
    token = f"hook_payload_pages:{order}"
    async with console.engine.worker([follow]):
        handle = await client.start(follow, order)
        await client.wait_for_hook(token, timeout=10)
    hook = await client.world.get_hook(token)
    assert hook is not None
    for start in range(0, count, BATCH):
        received = [
            NewEvent(
                EventType.HOOK_RECEIVED, hook.correlation_id, {"payload": {"n": n, "text": TEXT}}
            )
            for n in range(start, min(count, start + BATCH))
        ]
        await client.world.append(handle.run_id, received)
    return handle.run_id, token


def _numbers(rows: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(row["n"], row["payload"]["n"]) for row in rows]


async def test_a_hook_of_5000_payloads_keeps_the_run_json_bounded_and_pages_every_payload(
    console: Console,
) -> None:
    run_id, token = await _resumed(console, "p1", COUNT)
    got = await console.http.get(f"/api/runs/{run_id}")
    assert got.status_code == 200, got.text[:300]
    (hook,) = got.json()["hooks"]
    assert hook["payloadCount"] == COUNT
    assert hook["payload"]["n"] == 0
    assert _numbers(hook["later"]) == [(n, n) for n in range(1, HEAD)]
    assert _numbers(hook["lastPayloads"]) == [(n, n) for n in range(COUNT - TAIL, COUNT)]
    assert hook["nextPayloadCursor"] == str(HEAD)
    # 60 payloads and a story that names the rest by their count: not 5,000 (over 1.1 MB)
    assert len(got.content) < 64_000, len(got.content)
    assert f"... {COUNT - HEAD - TAIL} more payloads" in got.json()["story"]

    pages = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads"
    walked: list[tuple[int, int]] = []
    cursor: str | None = "0"
    arrived = 0
    while cursor is not None:
        page = (await console.http.get(pages, params={"after": cursor, "limit": 777})).json()
        walked += _numbers(page["payloads"])
        cursor = page["nextCursor"]
        if arrived < 3:  # more payloads come while the walk goes on: its cursor still holds
            await console.engine.client.resume_hook(token, {"n": COUNT + arrived, "text": TEXT})
            arrived += 1
    assert page["payloadCount"] == COUNT + arrived
    assert walked == [(n, n) for n in range(COUNT + arrived)]

    # a page that starts at the end is empty, and says where the next payload will be
    end = (await console.http.get(pages, params={"after": COUNT + arrived})).json()
    assert end == {"payloads": [], "payloadCount": COUNT + arrived, "nextCursor": None}


async def test_bad_payload_cursors_and_limits_are_typed_4xx(console: Console) -> None:
    run_id, _ = await _resumed(console, "p2", 3)
    (hook,) = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"]
    assert hook["payloadCount"] == 3 and hook["nextPayloadCursor"] is None
    assert hook["lastPayloads"] == [] and len(hook["later"]) == 2
    pages = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads"
    for params in (
        {"after": "x"},
        {"after": "-1"},
        {"after": "4"},  # past the 3 payloads the hook has: no cursor this server gave
        {"after": "1" * 30},
        {"after": "٣"},  # a digit, but not an ASCII one
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": "many"},
    ):
        bad = await console.http.get(pages, params=params)
        assert bad.status_code == 400, (params, bad.text)
        assert bad.json()["error"]["code"] == "BAD_REQUEST"
    gone = await console.http.get(f"/api/runs/{run_id}/hooks/h999/payloads")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "HOOK_NOT_FOUND"
    no_run = await console.http.get(f"/api/runs/nosuchrun-p2/hooks/{hook['id']}/payloads")
    assert no_run.status_code == 404 and no_run.json()["error"]["code"] == "RUN_NOT_FOUND"
    # what a bad request asked for is not lost: the hook still reads whole
    page = (await console.http.get(pages)).json()
    assert [p["payload"]["n"] for p in page["payloads"]] == [0, 1, 2]


ROWS = "#timeline tr[data-kind^='hook']"


async def _opened(console: Console, page: Page, tag: str, count: int) -> tuple[str, str]:
    """A run whose hook took ``count`` payloads, its page open: the hook's token and id."""
    run_id, token = await _resumed(console, tag, count)
    hook_id = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"][0]["id"]
    await page.open(f"/runs/{run_id}")
    return token, hook_id


async def test_the_run_page_of_a_hook_of_thousands_of_payloads_loads_more_and_shows_a_late_one(
    console: Console, page: Page
) -> None:
    count = 2000
    token, hook_id = await _opened(console, page, "p3", count)
    rows = ROWS
    await page.text(f"{rows}[data-key='{hook_id}']", f"(payload 1 of {count})")
    await page.text(f"{rows}[data-key='{hook_id}#{count}']", f"(payload {count} of {count})")
    more = f"{rows}[data-key='{hook_id}@{HEAD}']"
    await page.text(more, f"{count - HEAD - TAIL} more payloads")
    shown = await page.script(f'return document.querySelectorAll("{rows}").length')
    assert shown == HEAD + TAIL + 1  # the payloads carried, and the row that says the rest

    await page.click(f"{more} button")
    await page.text(f"{rows}[data-key='{hook_id}#{HEAD + 200}']", f"(payload {HEAD + 200} of")
    await page.text(
        f"{rows}[data-key='{hook_id}@{HEAD + 200}']", f"{count - HEAD - TAIL - 200} more"
    )

    # a payload that arrives now reaches the open page (its live feed), with the count
    await console.engine.client.resume_hook(token, {"n": count, "text": "late"})
    late = f"{rows}[data-key='{hook_id}#{count + 1}']"
    await page.text(late, f'"late"}} (payload {count + 1} of {count + 1})')
    await page.text(f"{rows}[data-key='{hook_id}']", f"(payload 1 of {count + 1})")


async def test_the_run_page_keeps_a_hooks_last_payloads_shown_when_more_arrive(
    console: Console, page: Page
) -> None:
    count = 100
    token, hook_id = await _opened(console, page, "p4", count)
    rows = ROWS
    first_of_tail = count - TAIL + 1  # the oldest of the last payloads the run's JSON carries
    await page.text(f"{rows}[data-key='{hook_id}#{first_of_tail}']", f"of {count})")

    # one more arrives: the run's JSON now carries the 10 after it, and the page refreshes
    await console.engine.client.resume_hook(token, {"n": count, "text": "late"})
    await page.text(f"{rows}[data-key='{hook_id}#{count + 1}']", f"of {count + 1})")
    # the row the page showed stays, rather than fold back into the "more payloads" row
    await page.text(
        f"{rows}[data-key='{hook_id}#{first_of_tail}']",
        f"(payload {first_of_tail} of {count + 1})",
    )
    await page.text(f"{rows}[data-key='{hook_id}@{HEAD}']", f"{count - HEAD - TAIL} more payloads")
