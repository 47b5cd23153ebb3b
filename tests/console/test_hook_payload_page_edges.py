"""The pages of a hook's payloads at their edges, on every world: a payload kept in a blob is
linked from its page and streams back byte for byte, one whose blob is gone is said at its
place while the page still reads, an archived run's hook pages from the archive, the endpoint
needs the read token where reads do, and cursors a person might type for a number ("1e3",
"+5", " 5") are typed 400s (docs/console.md, "Hooks with many payloads")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import wayline
from tests.blobs.stores import remove_blob
from tests.console.conftest import AUTH, TOKEN, Console
from tests.console.test_large_step_results import said_corrupt
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app
from wayline.world.ports.blobs import CHUNK_BYTES

BLOB_CHARS = 300_000  # over every world's inline threshold (256 KiB): stored in a blob
COUNT = 64  # past the 60 the run's JSON carries: payloads 50 to 53 are read from a page
HEAD = 50


@wayline.workflow(name="hook_payload_page_edges.take")
async def take(order: str, count: int) -> int:
    # the payloads' numbers, as a check that each came once and in order
    numbers = [-1]
    async for payload in wayline.create_hook(f"hook_payload_page_edges:{order}"):
        assert payload["n"] == numbers[-1] + 1
        numbers.append(payload["n"])
        if len(numbers) > count:
            break
    return len(numbers) - 1


def _payload(n: int) -> dict[str, Any]:
    return {"n": n, "text": "b" * BLOB_CHARS if n in (51, 52) else "s"}


async def _taken(console: Console, order: str) -> str:
    client = console.engine.client
    token = f"hook_payload_page_edges:{order}"
    async with console.engine.worker([take]):
        handle = await client.start(take, order, COUNT)
        await client.wait_for_hook(token, timeout=10)
        for n in range(COUNT):
            await client.resume_hook(token, _payload(n))
        assert await handle.result(timeout=60) == COUNT
    return handle.run_id


async def _gap(http: httpx.AsyncClient, run_id: str) -> tuple[dict[str, Any], httpx.Response]:
    """The run's JSON, and the page of the payloads it left out (50 to 53)."""
    run = (await http.get(f"/api/runs/{run_id}", headers=AUTH)).json()
    (hook,) = run["hooks"]
    assert hook["nextPayloadCursor"] == str(HEAD)
    pages = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads"
    return run, await http.get(pages, params={"after": HEAD, "limit": 4}, headers=AUTH)


async def test_blob_payloads_in_a_page_are_linked_and_a_gone_one_is_said_at_its_place(
    console: Console,
) -> None:
    run_id = await _taken(console, "e1")
    await remove_blob(console.engine.world, run_id, _payload(52))  # behind the world's back
    _, got = await _gap(console.http, run_id)
    assert got.status_code == 200, got.text[:300]
    page = got.json()
    assert [p["n"] for p in page["payloads"]] == [50, 51, 52, 53]
    assert page["nextCursor"] == "54" and page["payloadCount"] == COUNT
    small, large, gone, after = page["payloads"]
    assert small["payload"] == _payload(50) and small["payloadPayload"] is None
    stored = json.dumps(_payload(51), separators=(",", ":")).encode()
    assert large["payload"] is None
    assert large["payloadPayload"]["bytes"] == len(stored)
    assert large["payloadPayload"]["preview"] == stored[:1024].decode()
    body = await console.http.get(large["payloadPayload"]["href"])
    assert body.status_code == 200 and body.content == stored
    assert gone["payload"] is None
    await said_corrupt(console, gone["payloadPayload"])
    assert after["payload"] == _payload(53)  # the rows past the gone one still read


async def test_an_archived_runs_hook_pages_from_the_archive_and_needs_the_read_token(
    console: Console,
) -> None:
    run_id = await _taken(console, "e2")
    await remove_blob(console.engine.world, run_id, _payload(52))
    assert await console.engine.world.archive_runs(older_than=0) >= 1
    assert await console.engine.world.get_run(run_id) is None
    app = create_app(
        console.engine.client, world_url="test://world", token=TOKEN, reads_need_token=True
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        run, got = await _gap(http, run_id)
        assert run["archived"] is True
        assert got.status_code == 200, got.text[:300]
        assert [p["n"] for p in got.json()["payloads"]] == [50, 51, 52, 53]
        (hook,) = run["hooks"]
        pages = f"/api/runs/{run_id}/hooks/{hook['id']}/payloads"
        refused = await http.get(pages)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "UNAUTHORIZED"
        for after in ("1e3", "+5", " 5", "5 ", "0x1", "٣"):
            bad = await http.get(pages, params={"after": after}, headers=AUTH)
            assert bad.status_code == 400, (after, bad.text)
            assert bad.json()["error"]["code"] == "BAD_REQUEST"
        # at the count: an empty page that says where the next payload will be
        end = (await http.get(pages, params={"after": COUNT}, headers=AUTH)).json()
        assert end == {"payloads": [], "payloadCount": COUNT, "nextCursor": None}


async def test_a_hook_made_while_the_run_json_reads_a_blob_preview_does_not_break_it(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's JSON reads a large payload's first KiB from its blob while other requests of
    the run go on: one that brings the kept fold forward meanwhile (a page of steps, after the
    workflow made a hook) must not break the hooks the run's JSON is still going through."""
    client, world = console.engine.client, console.engine.world
    token = "hook_payload_page_edges:e3"
    async with console.engine.worker([take]):
        handle = await client.start(take, "e3", 2)
        await client.wait_for_hook(token, timeout=10)
        await client.resume_hook(token, {"n": 0, "text": "b" * BLOB_CHARS})
    entered, release = asyncio.Event(), asyncio.Event()
    original = world.blob_chunks

    async def gated(run_id: str, ref: Any, chunk_bytes: int = CHUNK_BYTES) -> AsyncIterator[bytes]:
        entered.set()  # the run's JSON is reading the preview: the fold moves now
        await release.wait()
        async for chunk in original(run_id, ref, chunk_bytes):
            yield chunk

    monkeypatch.setattr(world, "blob_chunks", gated)
    reading = asyncio.create_task(console.http.get(f"/api/runs/{handle.run_id}"))
    await asyncio.wait_for(entered.wait(), 10)
    made = NewEvent(EventType.HOOK_CREATED, "h99", {"token": "hook_payload_page_edges:e3b"})
    await world.append(handle.run_id, [made])
    steps = await console.http.get(f"/api/runs/{handle.run_id}/steps")  # catches the fold up
    assert steps.status_code == 200, steps.text
    release.set()
    got = await asyncio.wait_for(reading, 30)
    assert got.status_code == 200, got.text[:300]
    first = got.json()["hooks"][0]
    assert first["payload"] is None and first["payloadPayload"]["bytes"] > BLOB_CHARS
    again = (await console.http.get(f"/api/runs/{handle.run_id}")).json()
    assert [h["token"] for h in again["hooks"]] == [token, "hook_payload_page_edges:e3b"]
