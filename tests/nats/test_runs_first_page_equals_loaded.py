"""A console's first runs pages before its runs model has loaded are the pages the loaded
model gives, against a real nats-server: the newest runs and the next page by cursor, by
status, by workflow and by search attribute, with runs written while the load is under way
and with entries in the index that no writer made (a status that is not one, a creation time
that is not a time). The tail reads the index's stream without a subject filter
(``runs_model.read_window``), so an entry it cannot parse is skipped, never a failed call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.nats_fixtures import OpenWorlds, console_api, hold_before
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_index, runs_tail

_WF = "first-equal-wf"
_OTHER = "first-equal-other"


async def _run(world: Any, i: int) -> str:
    """A run of one of two workflows with a search attribute; every third completed, every
    fifth failed, the rest pending."""
    run_id = new_run_id()
    data = {"workflow": _WF if i % 2 else _OTHER, "input": [i], "search": {"tier": f"k{i % 3}"}}
    events = [NewEvent(EventType.RUN_CREATED, data=data)]
    if i % 3 == 0:
        events.append(NewEvent(EventType.RUN_COMPLETED, data={"output": i}))
    elif i % 5 == 0:
        error = {"type": "E", "message": "on purpose"}
        events.append(NewEvent(EventType.RUN_FAILED, data={"error": error}))
    await world.append(run_id, events, expected_seq=0)
    return run_id


_QUERIES: list[dict[str, str]] = [
    {"limit": "4"},
    {"limit": "3", "status": "completed"},
    {"limit": "3", "status": "failed"},
    {"limit": "3", "status": "pending"},
    {"limit": "3", "workflow": _WF},
    {"limit": "2", "workflow": _OTHER, "status": "completed"},
    {"limit": "3", "where": "tier=k1"},
]


async def _pages(http: httpx.AsyncClient) -> dict[str, Any]:
    """Each query's first page and the page after it by cursor, with their counts."""
    out: dict[str, Any] = {}
    for query in _QUERIES:
        name = "&".join(f"{k}={v}" for k, v in query.items())
        first = await http.get("/api/runs", params=query)
        assert first.status_code == 200, first.text
        body = first.json()
        out[name] = body
        if body["nextCursor"]:
            second = await http.get("/api/runs", params={**query, "cursor": body["nextCursor"]})
            assert second.status_code == 200, second.text
            out[name + " (page 2)"] = second.json()["runs"]
    return out


async def loaded_pages(open_nats_world: OpenWorlds) -> dict[str, Any]:
    """The pages (``_pages``) of a console whose runs model has loaded: the pages to give."""
    ref = await open_nats_world()
    async with console_api(ref) as http:
        await http.get("/api/runs")
        assert await ref.runs_followed(30.0) is not None
        return await _pages(http)


@dataclass(frozen=True)
class HeldLoad:
    """A console whose runs model's load is held: its API, its world, its model (not loaded),
    the event that lets the load go on, and its pages before the load."""

    http: httpx.AsyncClient
    console: Any
    model: Any
    go_on: asyncio.Event
    before: dict[str, Any]


@asynccontextmanager
async def held_load(
    open_nats_world: OpenWorlds, hold: tuple[asyncio.Event, asyncio.Event], want: dict[str, Any]
) -> AsyncIterator[HeldLoad]:
    """A new console whose load ``hold`` (``hold_before``) holds: its newest page is read from
    the tail, which did not read the whole stream, and is the loaded model's (``want``); its
    pages are taken while the model is not loaded."""
    console = await open_nats_world()
    async with console_api(console) as http:
        newest = await asyncio.wait_for(http.get("/api/runs", params={"limit": "4"}), 30.0)
        tail = console._listing._tail
        assert tail is not None and tail.floor > tail.first, "the tail read the whole stream"
        assert newest.json() == want["limit=4"]
        before = await asyncio.wait_for(_pages(http), 30.0)
        model = console._listing.model
        assert model is not None and not model.loaded
        yield HeldLoad(http, console, model, hold[1], before)


async def add_foreign_subjects(writer: Any, tail: str) -> str:
    """Configure the runs index's stream, as by hand, to hold also the subjects of a new
    prefix followed by ``tail`` (``.>`` or ``.ri.>``); the prefix is returned."""
    index = writer._listing.runs()
    js = writer._listing._js()
    config = (await js.stream_info(index.stream)).config
    foreign = f"zz{new_run_id()[-8:]}"
    config.subjects = [*config.subjects, f"{foreign}{tail}"]
    await js.update_stream(config)
    return foreign


async def test_the_first_pages_before_the_load_are_the_loaded_model_s_pages(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_tail, "SKEW", 0.2)
    monkeypatch.setattr(runs_tail, "WINDOW", 8)  # the page reads several windows back
    writer = await open_nats_world()
    for i in range(40):
        await _run(writer, i)
    assert await writer.flush_runs_index()
    index = writer._listing.runs()
    js = writer._listing._js()
    # entries no writer made, among the newest: a status that is none, a time that is NaN
    prefix = index.names.prefix
    await js.publish(f"{prefix}.ri.bogus.{_WF}.3ff0000000000000.wf_bogus", b"{}")
    await js.publish(f"{prefix}.ri.pending.{_WF}.7ff8000000000000.wf_nan", b"not json")
    await asyncio.sleep(0.3)  # past the tail's skew: the newest runs are read from the tail
    for i in range(40, 52):
        await _run(writer, i)
    assert await writer.flush_runs_index()
    want = await loaded_pages(open_nats_world)
    # the console's load held before it lists the index's names
    hold = hold_before(monkeypatch, runs_index.RunsIndex, "listed")
    async with held_load(open_nats_world, hold, want) as held:
        http, console, model = held.http, held.console, held.model
        assert held.before == want

        # runs written, and a run moved to another status, while the load is held
        late = [await _run(writer, i) for i in range(52, 58)]
        await writer.append(late[1], [NewEvent(EventType.RUN_CANCELLED)])
        assert await writer.flush_runs_index()
        loading = await asyncio.wait_for(_pages(http), 30.0)
        assert not model.loaded
        assert late[-1] in {r["runId"] for r in loading["limit=4"]["runs"]}
        assert "cancelled" in loading["limit=4"]["counts"]
        held.go_on.set()
        assert await console.runs_followed(30.0) is model
        loaded = await _pages(http)
    assert loading == loaded
    reader = await open_nats_world()  # follows nothing: the index's names
    for query in _QUERIES:
        if "where" in query:
            continue
        name = "&".join(f"{k}={v}" for k, v in query.items())
        status = query.get("status")
        page = await reader.runs_page(
            after=None,
            limit=int(query["limit"]),
            status=None if status is None else RunStatus(status),
            workflow=query.get("workflow"),
        )
        assert [r["runId"] for r in loaded[name]["runs"]] == [r.run_id for r in page], name


async def test_entries_outside_the_index_s_subjects_are_never_runs(
    open_nats_world: OpenWorlds,
) -> None:
    """The index's stream is read without a subject filter: a stream configured by hand to
    hold other subjects too gives messages shaped as entries under another prefix, which name
    no run, neither in the first page read from the tail nor in the loaded model's counts."""
    writer = await open_nats_world()
    for i in range(6):
        await _run(writer, i)
    assert await writer.flush_runs_index()
    want = await writer.count_runs()
    console = await open_nats_world()  # started (provisioned) before the stream is changed
    index = writer._listing.runs()
    js = writer._listing._js()
    foreign = await add_foreign_subjects(writer, ".ri.>")
    newest = time.time() + 3600  # first in the order, were it a run

    async def forge(run_id: str) -> None:
        # an entry's subject as the index's writer makes it, under another prefix
        subject = index.subject_of(RunStatus.PENDING, _WF, newest, run_id)
        await js.publish(foreign + subject[len(index.names.prefix) :], b"{}")

    await forge("wf_foreign_before")
    async with console_api(console) as http:
        first = (await http.get("/api/runs")).json()
        assert await console.runs_followed(30.0) is not None
        await forge("wf_foreign_after")  # read by the loaded model's catch-up
        # a page that would not show it (a row's log found gone drops its run): the counts
        # are the model's as its catch-up left them
        loaded = (await http.get("/api/runs", params={"status": "completed"})).json()
    shown = {r["runId"] for r in first["runs"]} | {r["runId"] for r in loaded["runs"]}
    assert not {"wf_foreign_before", "wf_foreign_after"} & shown
    assert first["counts"] == loaded["counts"] == {str(s): n for s, n in want.items()}
