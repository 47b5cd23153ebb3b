"""A run's large input and output in the console, on every world: the run's JSON carries
their size, first KiB and link instead of the value; the link streams the value back byte for
byte (from the blob store where the world keeps it out of line); the page shows the preview
and the link; a blob that is gone is a typed error, not a crash or a cut-off body."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import httpx
from selenium.webdriver.remote.webdriver import WebDriver

import wayline
from tests.blobs.stores import remove_blob
from tests.console.browser import Page
from tests.console.conftest import TOKEN, Console, served_page
from wayline.cli.console import create_app

RESULT_CHARS = 5_000_000  # a 5 MB result: well over any world's inline threshold
INLINE_BYTES = 64 * 1024  # the largest input or output inlined in a run's JSON (docs/console.md)
PREVIEW_BYTES = 1024  # what the run's JSON carries of a larger one


@wayline.workflow(name="console.large_output")  # explicit: unique across the suite
async def large_output(size: int, filler: str) -> str:
    return filler * size


def _stored(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


async def _large_run(console: Console, filler: str = "r") -> tuple[str, str]:
    client = console.engine.client
    async with console.engine.worker([large_output]):
        handle = await client.start(large_output, RESULT_CHARS, filler)
        result = await handle.result(timeout=60)
    return handle.run_id, result


async def test_a_large_output_is_linked_from_the_run_and_streamed_byte_for_byte(
    console: Console,
) -> None:
    run_id, result = await _large_run(console)
    run = (await console.http.get(f"/api/runs/{run_id}")).json()
    assert run["output"] is None
    expected = _stored(result)
    assert run["outputPayload"] == {
        "bytes": len(expected),
        "preview": expected[:PREVIEW_BYTES].decode(),
        "href": f"/api/runs/{run_id}/output",
    }
    assert run["inputPayload"] is None and run["input"] is not None  # small: inline

    async with console.http.stream("GET", run["outputPayload"]["href"]) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert "content-length" not in response.headers  # sent chunked, not whole
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    assert body == expected


async def test_the_run_json_of_a_1_mb_result_does_not_carry_it_in_its_story(
    console: Console,
) -> None:
    client = console.engine.client
    async with console.engine.worker([large_output]):
        handle = await client.start(large_output, 1_000_000, "s")
        await handle.result(timeout=60)
    response = await console.http.get(f"/api/runs/{handle.run_id}")
    run = response.json()
    assert run["output"] is None and run["outputPayload"] is not None
    # the story's result line is cut as its input line is: the value is read from its link
    result = [line for line in run["story"].splitlines() if line.startswith("result")]
    assert len(result) == 1 and len(result[0]) < 300, len(result[0])
    assert len(response.content) < INLINE_BYTES, (len(response.content), len(run["story"]))


async def test_a_payload_of_up_to_64_kib_is_inline_and_its_link_gives_it_too(
    console: Console,
) -> None:
    client = console.engine.client
    async with console.engine.worker([large_output]):
        # a string of n characters is n + 2 bytes of JSON (its quotes)
        edge = await client.start(large_output, INLINE_BYTES - 2, "e")
        over = await client.start(large_output, INLINE_BYTES - 1, "e")
        await edge.result(timeout=30)
        await over.result(timeout=30)
    inline = (await console.http.get(f"/api/runs/{edge.run_id}")).json()
    assert inline["output"] == "e" * (INLINE_BYTES - 2) and inline["outputPayload"] is None
    streamed = await console.http.get(f"/api/runs/{edge.run_id}/output")
    assert streamed.content == _stored(inline["output"])
    linked = (await console.http.get(f"/api/runs/{over.run_id}")).json()
    assert linked["output"] is None and linked["outputPayload"]["bytes"] == INLINE_BYTES + 1


async def test_head_on_a_payload_link_answers_its_length_and_no_body(console: Console) -> None:
    run_id, _ = await _large_run(console, "d")
    for which in ("output", "input"):  # a blob, and a small inline value
        response = await console.http.head(f"/api/runs/{run_id}/{which}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        # the length comes from the run's reference (or its small inline value), unread
        body = (await console.http.get(f"/api/runs/{run_id}/{which}")).content
        assert response.headers["content-length"] == str(len(body))
        assert response.content == b""
    missing = await console.http.head("/api/runs/wf_00000000000000000000000000000000/output")
    assert missing.status_code == 404


async def test_a_missing_blob_is_a_typed_error_before_any_byte(console: Console) -> None:
    run_id, result = await _large_run(console, "m")
    world = console.engine.world
    ref = await world.payload_blob(run_id, "output")
    assert ref is not None
    await remove_blob(world, run_id, result)  # behind the world's back
    response = await console.http.get(f"/api/runs/{run_id}/output")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CORRUPT_LOG"
    assert f"run {run_id}: event {ref.seq}" in error["message"] and "no blob" in error["message"]


async def test_a_run_whose_output_blob_is_gone_is_a_typed_error_in_a_fresh_console(
    console: Console,
) -> None:
    run_id, result = await _large_run(console, "f")
    await remove_blob(console.engine.world, run_id, result)
    fresh = await console.engine.make_world()  # a console process of its own: nothing cached
    app = create_app(wayline.Client(fresh), world_url="test://world")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        # the run's JSON reads only the blob's first KiB, and says there why it cannot
        response = await http.get(f"/api/runs/{run_id}")
        assert response.status_code == 200
        linked = response.json()["outputPayload"]
        assert linked["error"]["code"] == "CORRUPT_LOG" and linked["preview"] == ""
        assert f"run {run_id}" in linked["error"]["message"]
        response = await http.get(f"/api/runs/{run_id}/output")
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "CORRUPT_LOG" and f"run {run_id}" in error["message"]


async def test_the_run_page_shows_a_large_results_preview_and_its_link(
    console: Console, page: Page
) -> None:
    run_id, result = await _large_run(console, "p")
    await page.open(f"/runs/{run_id}")
    await page.text("#output-preview", '"ppppp')
    link = await page.text("#output-all", f"show all ({len(_stored(result))} bytes)")
    assert link
    href = await page.script("return document.getElementById('output-all').href")
    assert href.endswith(f"/api/runs/{run_id}/output")
    shown = await page.script("return document.getElementById('output-preview').textContent")
    assert len(shown) <= PREVIEW_BYTES + 1  # the first KiB and an ellipsis, not 5 MB
    # over real HTTP (the in-process transport buffers a body whole): the link's body is sent
    # chunked, and is the value's stored JSON byte for byte
    async with httpx.AsyncClient() as http, http.stream("GET", href) as response:
        assert response.headers.get("transfer-encoding") == "chunked"
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    assert body == _stored(result)


async def test_show_all_with_a_token_shows_a_failed_read_in_the_page_not_a_window(
    console: Console, chromium: WebDriver, tmp_path: Path
) -> None:
    run_id, result = await _large_run(console, "t")
    await remove_blob(console.engine.world, run_id, result)  # so the link's read fails
    async with served_page(console, chromium, tmp_path, reads_need_token=True) as page:
        await page.open("/")
        await page.type("#token", TOKEN + "\n")
        await page.open(f"/runs/{run_id}")
        await page.click("#output-all")
        await page.text("#output-error", "CORRUPT_LOG")
        # the window opened in the click was closed again: no error's JSON shown as the value
        windows = await page.until(
            lambda driver: len(driver.window_handles) == 1 or None, "one window"
        )
        assert windows is True


async def test_show_all_with_a_token_opens_the_value_in_a_window_of_its_own(
    console: Console, chromium: WebDriver, tmp_path: Path
) -> None:
    run_id, _ = await _large_run(console, "w")
    async with served_page(console, chromium, tmp_path, reads_need_token=True) as page:
        await page.open("/")
        await page.type("#token", TOKEN + "\n")
        await page.open(f"/runs/{run_id}")
        main = chromium.current_window_handle
        await page.click("#output-all")
        opened = await page.until(
            lambda driver: [h for h in driver.window_handles if h != main] or None, "a window"
        )
        chromium.switch_to.window(opened[0])
        try:
            start = await page.until(
                lambda driver: (
                    driver.execute_script(
                        "return document.body && document.body.innerText.slice(0, 6)"
                    )
                    or None
                ),
                "the value",
            )
            assert start == '"wwwww'
        finally:
            chromium.close()
            chromium.switch_to.window(main)


@wayline.workflow(name="console.large_input")  # explicit: unique across the suite
async def large_input(text: str) -> int:
    return len(text)


INPUT_CHARS = 12_000_000  # a 12 MB input
READ_BOUND = 4 * 1024 * 1024  # what reading its run's JSON may allocate at most, at peak


async def test_the_run_json_of_a_large_input_measures_it_without_reading_it(
    console: Console,
) -> None:
    client = console.engine.client
    async with console.engine.worker([large_input]):
        handle = await client.start(large_input, "n" * INPUT_CHARS)
        assert await handle.result(timeout=60) == INPUT_CHARS
    fresh = await console.engine.make_world()  # a console process of its own: nothing cached
    app = create_app(wayline.Client(fresh), world_url="test://world")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        tracemalloc.start()
        try:
            response = await http.get(f"/api/runs/{handle.run_id}")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert response.status_code == 200
        run = response.json()
        expected = (await http.get(f"/api/runs/{handle.run_id}/input")).content
    assert run["input"] is None and run["inputPayload"]["bytes"] == len(expected)
    assert run["inputPayload"]["preview"] == expected[:PREVIEW_BYTES].decode()
    # the size is the blob's reference's, the preview its first chunk: no 12 MB value read
    assert peak < READ_BOUND, peak
