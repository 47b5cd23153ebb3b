"""An archived run in the console, on every world: ``wayline archive`` moves an ended run out of
the live runs, and its page, its large output and its step's large result are still read and
streamed, from where the archive keeps them (SQLite's archive tables, NATS's archive stream and
the object store the archived events name)."""

from __future__ import annotations

import json

import httpx

import wayline
from tests.console.browser import Page
from tests.console.conftest import Console

CHARS = 300_000  # over every world's inline threshold (256 KiB): stored in a blob
PREVIEW_BYTES = 1024


@wayline.step(name="archived_runs.produce")
async def produce(size: int, filler: str) -> str:
    return filler * size


@wayline.workflow(name="archived_runs.flow")  # explicit: unique across the suite
async def flow(size: int, filler: str) -> str:
    return (await produce(size, filler)).upper()


def _stored(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def _archived_run(console: Console, filler: str) -> str:
    engine = console.engine
    async with engine.worker([flow]):
        handle = await engine.client.start(flow, CHARS, filler)
        await handle.result(timeout=60)
    assert await engine.world.archive_runs(older_than=0) >= 1
    assert await engine.world.get_run(handle.run_id) is None  # no longer a live run
    return handle.run_id


async def _body(http: httpx.AsyncClient, href: str) -> bytes:
    async with http.stream("GET", href) as response:
        assert response.status_code == 200, await response.aread()
        return b"".join([chunk async for chunk in response.aiter_raw()])


async def test_an_archived_runs_page_and_payloads_are_read_from_the_archive(
    console: Console,
) -> None:
    run_id = await _archived_run(console, "a")
    response = await console.http.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["archived"] is True and run["status"] == "completed"
    output = _stored("A" * CHARS)
    assert run["outputPayload"] == {
        "bytes": len(output),
        "preview": output[:PREVIEW_BYTES].decode(),
        "href": f"/api/runs/{run_id}/output",
    }
    assert await _body(console.http, run["outputPayload"]["href"]) == output
    head = await console.http.head(run["outputPayload"]["href"])
    assert head.headers["content-length"] == str(len(output))
    (step,) = run["steps"]
    assert step["resultPayload"]["bytes"] == len(_stored("a" * CHARS))
    assert await _body(console.http, step["resultPayload"]["href"]) == _stored("a" * CHARS)
    paged = (await console.http.get(f"/api/runs/{run_id}/steps")).json()
    assert paged["stepCount"] == 1 and paged["steps"][0]["id"] == step["id"]
    inline = (await console.http.get(f"/api/runs/{run_id}/input")).content
    assert json.loads(inline) == run["input"]  # small: inline in the archived log
    absent = await console.http.get(f"/api/runs/{run_id}/steps/s999/result")
    assert (absent.status_code, absent.json()["error"]["code"]) == (404, "STEP_NOT_FOUND")


async def test_the_page_of_an_archived_run_shows_its_output_and_says_it_is_archived(
    console: Console, page: Page
) -> None:
    run_id = await _archived_run(console, "p")
    await page.open(f"/runs/{run_id}")
    await page.text("#times", "archived")
    await page.text("#output-preview", '"PPPPP')
    await page.text("#output-all", f"show all ({len(_stored('P' * CHARS))} bytes)")
