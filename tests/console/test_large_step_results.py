"""A step's large result in the console, on every world: the step's row carries its size, first
KiB and a link instead of the value; the link streams it back byte for byte (from the blob
store where the world keeps it out of line); a step id the run does not have is a typed 4xx;
the page shows the preview and "show all" in the step's row."""

from __future__ import annotations

import json
from typing import Any

import httpx

import wayline
from tests.blobs.stores import remove_blob
from tests.console.browser import Page
from tests.console.conftest import Console
from tests.hostile.poison import forge_event
from wayline.world.blobs import REF

PREVIEW_BYTES = 1024  # what a large value's JSON carries of it (docs/console.md)
RESULT_INLINE_BYTES = 4096  # the largest step result sent with its step
BLOB_CHARS = 300_000  # over every world's inline threshold (256 KiB): stored in a blob
EVENT_CHARS = 10_000  # over 4 KiB, under the threshold: inline in its event


@wayline.step(name="large_step_results.produce")
async def produce(size: int, filler: str) -> str:
    return filler * size


@wayline.workflow(name="large_step_results.flow")  # explicit: unique across the suite
async def flow(size: int, filler: str) -> int:
    return len(await produce(size, filler))


def _stored(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def refused_as(console: Console, cases: dict[str, tuple[int, str]]) -> None:
    """Each path answers its (status, code)."""
    for path, (status, code) in cases.items():
        response = await console.http.get(path)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), path


async def said_corrupt(console: Console, linked: dict[str, Any]) -> None:
    """A large value that cannot be read is said at its place, and its link is a typed 409
    before any byte."""
    assert linked["error"]["code"] == "CORRUPT_LOG"
    response = await console.http.get(linked["href"])
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "CORRUPT_LOG"


async def shown_with_its_link(page: Page, run_id: str, link: str, href: str, value: Any) -> None:
    """The run's page shows a large value's preview and *show all (N bytes)* at ``link``,
    which streams the value byte for byte over real HTTP from ``href``."""
    await page.open(f"/runs/{run_id}")
    await page.text(link, f"show all ({len(_stored(value))} bytes)")
    row = await page.script(f"return document.querySelector('{link}').closest('td').textContent")
    assert _stored(value)[:20].decode() in row and len(row) < 1000  # a preview, not 300 KB
    shown = await page.script(f"return document.querySelector('{link}').href")
    assert shown.endswith(href)
    async with httpx.AsyncClient() as http:  # the served console, over real HTTP
        body = (await http.get(shown)).content
    assert body == _stored(value)


async def _run(console: Console, size: int, filler: str) -> str:
    async with console.engine.worker([flow]):
        handle = await console.engine.client.start(flow, size, filler)
        assert await handle.result(timeout=60) == size
    return handle.run_id


async def test_a_large_step_result_is_linked_from_its_row_and_streamed_byte_for_byte(
    console: Console,
) -> None:
    for size, filler in ((BLOB_CHARS, "b"), (EVENT_CHARS, "e")):  # from a blob, from an event
        run_id = await _run(console, size, filler)
        run = (await console.http.get(f"/api/runs/{run_id}")).json()
        (step,) = run["steps"]
        expected = _stored(filler * size)
        assert step["result"] is None and step["resultBytes"] == len(expected)
        href = f"/api/runs/{run_id}/steps/{step['id']}/result"
        assert step["resultPayload"] == {
            "bytes": len(expected),
            "preview": expected[:PREVIEW_BYTES].decode(),
            "href": href,
        }
        paged = (await console.http.get(f"/api/runs/{run_id}/steps")).json()
        assert paged["steps"][0]["resultPayload"] == step["resultPayload"]
        async with console.http.stream("GET", href) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"] == "application/json"
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        assert body == expected


async def test_a_small_step_result_stays_inline_and_its_link_gives_it_too(
    console: Console,
) -> None:
    run_id = await _run(console, RESULT_INLINE_BYTES - 2, "i")  # its JSON is 4 KiB exactly
    (step,) = (await console.http.get(f"/api/runs/{run_id}")).json()["steps"]
    assert step["result"] == "i" * (RESULT_INLINE_BYTES - 2) and step["resultPayload"] is None
    linked = await console.http.get(f"/api/runs/{run_id}/steps/{step['id']}/result")
    assert linked.content == _stored(step["result"])


async def test_a_step_result_link_of_a_step_the_run_lacks_is_a_typed_4xx(
    console: Console,
) -> None:
    run_id = await _run(console, 10, "u")
    cases = {
        f"/api/runs/{run_id}/steps/s999/result": (404, "STEP_NOT_FOUND"),
        f"/api/runs/{run_id}/steps/{'x' * 300}/result": (400, "BAD_REQUEST"),
        f"/api/runs/{run_id}/steps/%C3%A9/result": (400, "BAD_REQUEST"),
        "/api/runs/wf_00000000000000000000000000000000/steps/s1/result": (404, "RUN_NOT_FOUND"),
    }
    await refused_as(console, cases)


async def test_a_step_result_whose_blob_is_gone_is_a_typed_error_before_any_byte(
    console: Console,
) -> None:
    run_id = await _run(console, BLOB_CHARS, "g")
    await remove_blob(console.engine.world, run_id, "g" * BLOB_CHARS)  # behind its back
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    (step,) = run["steps"]
    # streamed from the blob store, not from a value the console holds: the read finds it gone
    await said_corrupt(console, step["resultPayload"])


async def test_the_run_page_shows_a_large_step_results_preview_and_its_link(
    console: Console, page: Page
) -> None:
    run_id = await _run(console, BLOB_CHARS, "q")
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    step_id = run["steps"][0]["id"]
    href = f"/api/runs/{run_id}/steps/{step_id}/result"
    await shown_with_its_link(page, run_id, f"#step-{step_id}-result-all", href, "q" * BLOB_CHARS)


@wayline.workflow(name="large_step_results.waits")
async def waits() -> str:
    return str(await wayline.create_hook("large_step_results.waits"))


async def test_a_step_result_holding_a_malformed_reference_is_a_409_on_its_link(
    console: Console,
) -> None:
    """A step's ``step_completed`` written into the log behind the world's back (into the
    SQLite file, onto the run's NATS subject) with a result that looks like a blob reference
    but names none (a digest that is not one): its link answers ``409 CORRUPT_LOG`` before any
    byte, the reference is never served as the value, and the run's page still opens and says
    why at the step's place. The same for a hook's payload (a forged ``hook_received``)."""
    async with console.engine.worker([waits]):
        handle = await console.engine.client.start(waits)
        await console.engine.client.wait_for_hook("large_step_results.waits", timeout=10)
    world, run_id = console.engine.world, handle.run_id
    (hook,) = (await console.http.get(f"/api/runs/{run_id}")).json()["hooks"]
    created = {"stepName": "large_step_results.forged", "input": {"args": []}, "occurrence": 0}
    await forge_event(world, run_id, "step_created", created, cid="s-forged")
    malformed = {REF: "not a digest", "bytes": 12}
    await forge_event(world, run_id, "step_completed", {"result": malformed}, cid="s-forged")
    # the waiting hook's payload too: a hook's payload is linked as a step's result is
    await forge_event(world, run_id, "hook_received", {"payload": malformed}, cid=hook["id"])

    response = await console.http.get(f"/api/runs/{run_id}/steps/s-forged/result")
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "CORRUPT_LOG"
    run = await console.http.get(f"/api/runs/{run_id}")
    assert run.status_code == 200, run.text
    (step,) = [s for s in run.json()["steps"] if s["id"] == "s-forged"]
    assert step["result"] is None
    assert step["resultPayload"]["error"]["code"] == "CORRUPT_LOG"
    paged = (await console.http.get(f"/api/runs/{run_id}/steps")).json()["steps"]
    assert [s["resultPayload"] for s in paged if s["id"] == "s-forged"] == [step["resultPayload"]]
    (hook,) = run.json()["hooks"]
    assert hook["payload"] is None
    await said_corrupt(console, hook["payloadPayload"])


async def test_the_story_says_a_step_result_kept_in_a_blob_by_its_size(console: Console) -> None:
    run_id = await _run(console, BLOB_CHARS, "r")
    story = (await console.http.get(f"/api/runs/{run_id}")).json()["story"]
    results = [line.strip() for line in story.splitlines() if line.startswith(" ")]
    size = len(_stored("r" * BLOB_CHARS))
    assert f'result "({size} bytes, stored out of line)"' in results, story
    assert REF not in story  # the blob's reference is never printed as the value
