"""What ``/events`` answers when the run changes while the page is read, on every world: an
append or a deletion that lands between the request's read of the page and its read of the
run's summary (``World.stored_run``) never makes the page end its walk early, count fewer
events than the page's read found, or send an empty page that says the log ends while its
``eventCount`` says it holds events; a walk that the run's archiving interrupts goes on from
the archive's copy (docs/console.md, "A run's events")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.conftest import Console
from tests.console.test_archived_runs import CHARS, flow
from tests.console.test_hook_payload_pages import _resumed
from wayline._core.events import EventType, NewEvent

LATE = 20  # events appended between the request's two reads


async def test_events_appended_while_a_page_is_read_are_counted_and_reachable(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run appends :data:`LATE` events right after the request reads its summary: the page
    the request then reads must not end the walk (``nextCursor`` null) before the events that
    existed when it was read, nor count fewer than them."""
    run_id, token = await _resumed(console, "events-r1", 10)
    world = console.engine.client.world
    hook = await world.get_hook(token)
    assert hook is not None
    before = await world.stored_run(run_id)
    assert before is not None
    total = before.last_seq
    summary, page_of = world.stored_run, world.events_page
    seen: dict[str, int] = {}

    async def summary_then_append(rid: str) -> Any:
        info = await summary(rid)
        if rid == run_id and "appended" not in seen:
            seen["appended"] = 1
            late = [
                NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, {"payload": {"n": n}})
                for n in range(LATE)
            ]
            await world.append(run_id, late)
        return info

    async def page_noting_the_log(rid: str, after: int, limit: int) -> Any:
        existing = await summary(rid)
        seen["at_page"] = existing.last_seq if existing is not None else 0
        return await page_of(rid, after, limit)

    monkeypatch.setattr(world, "stored_run", summary_then_append)
    monkeypatch.setattr(world, "events_page", page_noting_the_log)
    got = await console.http.get(
        f"/api/runs/{run_id}/events", params={"after": str(total - 5), "limit": "10"}
    )
    assert got.status_code == 200, got.text
    page = got.json()
    seqs = [e["seq"] for e in page["events"]]
    assert seqs and seqs[0] == total - 4 and seqs == list(range(seqs[0], seqs[-1] + 1))
    # every event the page's read could see is counted, and is in the page or after its cursor
    assert page["eventCount"] >= seen["at_page"], (page["eventCount"], seen["at_page"])
    assert page["nextCursor"] is not None or seqs[-1] >= seen["at_page"], (
        page["nextCursor"],
        seqs[-1],
        seen["at_page"],
    )
    assert page["eventCount"] >= seqs[-1]
    if page["nextCursor"] is not None:
        assert page["nextCursor"] == str(seqs[-1])


async def test_a_run_deleted_while_its_page_is_read_is_a_404_or_a_whole_page(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run is deleted (``wayline cleanup``) right after the request reads its summary: the
    answer is the run's 404, or the page the request read before the deletion, never an empty
    page that says the log ends while its ``eventCount`` says it has events."""
    run_id, _ = await _resumed(console, "events-r2", 10)
    await console.engine.client.terminate(run_id, "to be deleted")
    world = console.engine.client.world
    summary = world.stored_run

    async def summary_then_delete(rid: str) -> Any:
        info = await summary(rid)
        if rid == run_id:
            assert await world.delete_runs(older_than=0) >= 1
        return info

    monkeypatch.setattr(world, "stored_run", summary_then_delete)
    got = await console.http.get(f"/api/runs/{run_id}/events", params={"limit": "5"})
    if got.status_code == 404:
        assert got.json()["error"]["code"] == "RUN_NOT_FOUND"
        return
    assert got.status_code == 200, got.text
    page = got.json()
    assert [e["seq"] for e in page["events"]] == [1, 2, 3, 4, 5], page
    assert page["nextCursor"] == "5" and page["eventCount"] > 5


async def test_an_archived_runs_log_pages_from_the_archive_and_a_walk_goes_on_across_it(
    console: Console,
) -> None:
    """A walk of ``/events`` that the run's archiving (``wayline archive``) interrupts goes on
    from its cursor on the archive's copy, as the run's page and its steps and hooks are read,
    and a payload the archive keeps out of line is read from its blob as a live page's is."""
    engine = console.engine
    async with engine.worker([flow]):
        handle = await engine.client.start(flow, CHARS, "r")
        await handle.result(timeout=60)
    run_id = handle.run_id
    events = f"/api/runs/{run_id}/events"
    live = (await console.http.get(events)).json()
    first = (await console.http.get(events, params={"limit": "2"})).json()
    assert first["nextCursor"] == "2"
    assert await engine.world.archive_runs(older_than=0) >= 1
    assert await engine.world.get_run(run_id) is None  # no longer a live run

    rest = await console.http.get(events, params={"after": first["nextCursor"]})
    assert rest.status_code == 200, rest.text
    page = rest.json()
    assert first["events"] + page["events"] == live["events"]
    assert page["nextCursor"] is None and page["eventCount"] == live["eventCount"]
    (done,) = [e for e in page["events"] if e["type"] == "step_completed"]
    assert done["data"]["result"] == "r" * CHARS  # read from its blob, not its reference
    past = await console.http.get(events, params={"after": str(live["eventCount"] + 1)})
    assert (past.status_code, past.json()["error"]["code"]) == (400, "BAD_REQUEST")
