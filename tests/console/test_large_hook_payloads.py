"""A hook's large payload in the console, on every world: the run's JSON carries its size,
first KiB and a link instead of the value (for the first payload and for every later one);
the link streams it back byte for byte (from the blob store where the world keeps it out of
line); a hook or payload the run does not have is a typed 4xx; a blob that is gone is said at
the payload's place and its link is a 409 before any byte."""

from __future__ import annotations

import json

import wayline
from tests.blobs.stores import remove_blob
from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_large_step_results import (
    refused_as,
    said_corrupt,
    shown_with_its_link,
)

PREVIEW_BYTES = 1024  # what a large value's JSON carries of it (docs/console.md)
INLINE_BYTES = 4096  # the largest hook payload sent with its hook
BLOB_CHARS = 300_000  # over every world's inline threshold (256 KiB): stored in a blob
EVENT_CHARS = 10_000  # over 4 KiB, under the threshold: inline in its event


@wayline.workflow(name="large_hook_payloads.collect")
async def collect(order: str) -> list[int]:
    sizes = []
    async for payload in wayline.create_hook(f"large_hook_payloads:{order}"):
        sizes.append(len(payload["text"]))
        if len(sizes) == 3:
            return sizes
    return sizes


def _stored(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def _received(console: Console, order: str, payloads: list[object]) -> str:
    client = console.engine.client
    async with console.engine.worker([collect]):
        handle = await client.start(collect, order)
        token = f"large_hook_payloads:{order}"
        await client.wait_for_hook(token, timeout=10)
        for payload in payloads:
            await client.resume_hook(token, payload)
        assert await handle.result(timeout=60) == [len(p["text"]) for p in payloads]  # type: ignore[index]
    return handle.run_id


async def test_large_hook_payloads_are_linked_from_the_run_and_streamed_byte_for_byte(
    console: Console,
) -> None:
    # from a blob (the first), inline but large (a later one), small (the last)
    payloads: list[object] = [
        {"text": "b" * BLOB_CHARS},
        {"text": "e" * EVENT_CHARS},
        {"text": "s"},
    ]
    run_id = await _received(console, "l1", payloads)
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    (hook,) = run["hooks"]
    href = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads/"
    assert hook["payload"] is None and hook["later"][0]["payload"] is None
    for shown, n in ((hook, 0), (hook["later"][0], 1)):
        expected = _stored(payloads[n])
        assert shown["payloadPayload"] == {
            "bytes": len(expected),
            "preview": expected[:PREVIEW_BYTES].decode(),
            "href": f"{href}{n}",
        }
    assert hook["later"][1] == {
        **hook["later"][1],
        "payload": {"text": "s"},
        "payloadPayload": None,
    }
    assert len(json.dumps(run)) < 20_000  # the run's JSON carries previews, not 310 KB
    for n, payload in enumerate(payloads):
        async with console.http.stream("GET", f"{href}{n}") as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"] == "application/json"
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        assert body == _stored(payload)


async def test_a_hook_payload_link_the_run_lacks_is_a_typed_4xx(console: Console) -> None:
    run_id = await _received(console, "l2", [{"text": "x"}, {"text": "y"}, {"text": "z"}])
    (hook,) = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"]
    assert hook["payloadPayload"] is None and hook["payload"] == {"text": "x"}  # small: inline
    base = f"/api/runs/{run_id}/hooks"
    cases = {
        f"{base}/{hook['id']}/payloads/3": (404, "PAYLOAD_NOT_FOUND"),
        f"{base}/{hook['id']}/payloads/-1": (400, "BAD_REQUEST"),
        f"{base}/{hook['id']}/payloads/{'9' * 20}": (400, "BAD_REQUEST"),
        f"{base}/h999/payloads/0": (404, "HOOK_NOT_FOUND"),
        f"{base}/{'x' * 300}/payloads/0": (400, "BAD_REQUEST"),
        f"{base}/%C3%A9/payloads/0": (400, "BAD_REQUEST"),
        "/api/runs/wf_00000000000000000000000000000000/hooks/h1/payloads/0": (
            404,
            "RUN_NOT_FOUND",
        ),
    }
    await refused_as(console, cases)


async def test_a_hook_payload_whose_blob_is_gone_is_a_typed_error_before_any_byte(
    console: Console,
) -> None:
    payloads: list[object] = [{"text": "g" * BLOB_CHARS}, {"text": "a"}, {"text": "b"}]
    run_id = await _received(console, "l3", payloads)
    await remove_blob(console.engine.world, run_id, payloads[0])  # behind its back
    run = await console.http.get(f"/api/runs/{run_id}")
    assert run.status_code == 200, run.text  # the run's page still opens
    (hook,) = run.json()["hooks"]
    await said_corrupt(console, hook["payloadPayload"])


async def test_the_run_page_shows_a_large_hook_payloads_preview_and_its_link(
    console: Console, page: Page
) -> None:
    payloads: list[object] = [{"text": "q" * BLOB_CHARS}, {"text": "a"}, {"text": "b"}]
    run_id = await _received(console, "l4", payloads)
    (hook,) = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"]
    href = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads/0"
    await shown_with_its_link(page, run_id, f"#hook-{hook['id']}-payload-all", href, payloads[0])


async def test_the_run_page_shows_every_payload_a_hook_received_each_at_its_row(
    console: Console, page: Page
) -> None:
    """A hook read with ``async for`` takes several payloads: the timeline has a row for each
    (the hook's own for the first, one per later payload), a large later one as its preview
    and its link, as the first is."""
    payloads: list[object] = [{"text": "first"}, {"text": "w" * BLOB_CHARS}, {"text": "third"}]
    run_id = await _received(console, "l5", payloads)
    (hook,) = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"]
    rows = "#timeline tr[data-kind^='hook']"
    await page.open(f"/runs/{run_id}")
    await page.text(f"{rows}[data-key='{hook['id']}']", '{"text":"first"} (payload 1 of 3)')
    await page.text(f"{rows}[data-key='{hook['id']}#3']", '{"text":"third"} (payload 3 of 3)')
    second = f"{rows}[data-key='{hook['id']}#2']"
    await page.text(second, '{"text":"www')
    href = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads/1"
    await shown_with_its_link(page, run_id, f"#hook-{hook['id']}-payload-1-all", href, payloads[1])


async def test_the_story_says_a_hook_payload_kept_in_a_blob_by_its_size(console: Console) -> None:
    payloads: list[object] = [{"text": "b" * BLOB_CHARS}, {"text": "s"}, {"text": "t"}]
    run_id = await _received(console, "l9", payloads)
    story = (await console.http.get(f"/api/runs/{run_id}")).json()["story"]
    received = [line.split(": ", 1)[1] for line in story.splitlines() if "received after" in line]
    size = len(_stored(payloads[0]))
    assert received == [f'"({size} bytes, stored out of line)"', '{"text": "s"}', '{"text": "t"}']
