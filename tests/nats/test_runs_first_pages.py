"""A console's first runs pages while its runs model loads, against a real nats-server: they
are read from the runs index's newest entries (``runs_tail``), not from a listing of every
name of the index, and give the answers a world that does not follow its runs gives (the
newest runs, in the page's order; a cursor walk that shows every run once, across the load's
end), with the counts marked partial until the load is done."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.cli.console import create_app
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import runs_index, runs_model, runs_tail

_WF = "first-pages-wf"
_OTHER = "first-pages-other"


def _created(workflow: str, i: int) -> list[NewEvent]:
    events = [NewEvent(EventType.RUN_CREATED, data={"workflow": workflow, "input": [i]})]
    if i % 4 == 0:
        events.append(NewEvent(EventType.RUN_COMPLETED, data={"output": i}))
    return events


async def _fill(world: Any, old: int, new: int) -> list[str]:
    """``old`` runs, then (half a second later, past the tail's skew set below) ``new``
    runs: a page of the newest runs needs the newest entries alone."""
    ids = []
    for group in (old, new):
        for _ in range(group):
            ids.append(new_run_id())
            flow = _WF if len(ids) % 2 else _OTHER
            await world.append(ids[-1], _created(flow, len(ids)), expected_seq=0)
        assert await world.flush_runs_index()
        await asyncio.sleep(0.5)
    return ids


async def _walk(world: Any, size: int, **chosen: Any) -> list[str]:
    rows: list[str] = []
    after = None
    while page := await world.runs_page(after=after, limit=size, **chosen):
        rows += [r.run_id for r in page]
        after = (page[-1].created_at, page[-1].run_id)
    return rows


@contextlib.asynccontextmanager
async def _api(world: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The console's API over ``world``, called in-process."""
    app = create_app(wayline.Client(world), world_url="nats://test")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


class _Stuck:
    """Holds the model's load (its reads wait) until ``release``; counts the listings of
    the index's names (what a page read without the tail costs: seconds at 100,000 runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = asyncio.Event()
        self.listed = 0
        read, subjects = runs_model.RunsModel._read, runs_index.RunsIndex.subjects
        stuck = self

        async def slow(model: Any, start: int, batch: int) -> list[Any]:
            await stuck.gate.wait()
            return await read(model, start, batch)

        async def counted(index: Any, stream: str, pattern: str) -> list[str]:
            if stream == index.stream:
                stuck.listed += 1
            return await subjects(index, stream, pattern)

        monkeypatch.setattr(runs_model.RunsModel, "_read", slow)
        monkeypatch.setattr(runs_index.RunsIndex, "subjects", counted)
        monkeypatch.setattr(runs_tail, "WINDOW", 4)
        monkeypatch.setattr(runs_tail, "SKEW", 0.2)

    def release(self) -> None:
        self.gate.set()


@pytest.mark.parametrize("partitions", [1, 3])
async def test_the_first_pages_while_the_model_loads_are_the_newest_runs_from_the_tail(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    writer = await open_nats_world(partitions=partitions)
    ids = await _fill(writer, 30, 10)
    reader = await open_nats_world(partitions=partitions)  # follows nothing: the names
    want = {
        "all": await _walk(reader, 3),
        "wf": await _walk(reader, 3, workflow=_WF),
        "completed": await _walk(reader, 3, status=RunStatus.COMPLETED),
    }
    assert sorted(want["all"]) == sorted(ids)
    stuck = _Stuck(monkeypatch)
    console = await open_nats_world(partitions=partitions)
    await console.follow_runs()

    first = await asyncio.wait_for(console.runs_page(after=None, limit=5), 30.0)
    assert [r.run_id for r in first] == want["all"][:5]
    assert stuck.listed == 0, "the first page listed the index's names"
    tail = console._listing._tail
    assert tail is not None and tail.floor > tail.first, "the tail read the whole stream"
    assert not console.runs_loading()  # the counts are the index's, counted by the server

    # a walk of every run by cursor while the model loads: each run once, in the order of the
    # names' walk, the tail reading further back as the pages go deeper
    assert await asyncio.wait_for(_walk(console, 3), 30.0) == want["all"]
    assert await _walk(console, 3, workflow=_WF) == want["wf"]
    assert await _walk(console, 3, status=RunStatus.COMPLETED) == want["completed"]
    assert stuck.listed == 0
    assert console._listing.model is not None and not console._listing.model.loaded


@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_walk_begun_on_the_tail_goes_on_from_the_model_once_loaded(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    writer = await open_nats_world(partitions=partitions)
    await _fill(writer, 12, 9)
    reader = await open_nats_world(partitions=partitions)
    want = await _walk(reader, 2)
    stuck = _Stuck(monkeypatch)
    console = await open_nats_world(partitions=partitions)
    await console.follow_runs()
    rows: list[str] = []
    sources: list[str] = []
    after = None
    while True:
        model = console._listing.model
        sources.append("model" if model is not None and model.loaded else "tail")
        page = await asyncio.wait_for(console.runs_page(after=after, limit=2), 30.0)
        if not page:
            break
        rows += [r.run_id for r in page]
        after = (page[-1].created_at, page[-1].run_id)
        if len(rows) == 4:  # the load ends between two pages: the tail's cursor goes on
            stuck.release()
            assert await console.runs_followed(30.0) is not None
    assert sources[0] == "tail" and sources[-1] == "model", sources
    assert rows == want
    assert stuck.listed == 0
    assert console._listing._tail is None  # let go once the model answers


async def test_a_page_deeper_than_the_tail_reads_lists_the_names_and_is_right(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_nats_world()
    await _fill(writer, 12, 6)
    reader = await open_nats_world()
    want = await _walk(reader, 4)
    stuck = _Stuck(monkeypatch)
    monkeypatch.setattr(runs_tail, "MOST", 8)  # two windows of 4
    console = await open_nats_world()
    await console.follow_runs()
    assert await asyncio.wait_for(_walk(console, 4), 30.0) == want
    assert stuck.listed > 0  # the pages past the tail's 8 entries read the names


async def test_the_counts_while_the_model_loads_are_the_index_s_counted_by_the_server(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's first call does not list the index's names for its counts, nor count
    the runs the load has read so far: the server counts the index's entries of each status
    (``RunsIndex.counts``), which are the loaded model's counts, not marked partial."""
    writer = await open_nats_world()
    await _fill(writer, 5, 3)
    want = await writer.count_runs()
    assert want == {RunStatus.COMPLETED: 2, RunStatus.PENDING: 6}
    stuck = _Stuck(monkeypatch)
    console = await open_nats_world()
    async with _api(console) as http:
        loading = (await asyncio.wait_for(http.get("/api/runs?limit=3"), 30.0)).json()
        assert loading["countsPartial"] is False
        assert loading["counts"] == {"completed": 2, "pending": 6}
        of_wf = (await http.get("/api/runs", params={"workflow": _WF})).json()
        assert len(loading["runs"]) == 3 and loading["nextCursor"]
        assert stuck.listed == 0
        assert console._listing.model is not None and not console._listing.model.loaded
        stuck.release()
        assert await console.runs_followed(30.0) is not None
        loaded = (await http.get("/api/runs?limit=3")).json()
        assert (await http.get("/api/runs", params={"workflow": _WF})).json() == of_wf
    assert loaded == loading
    assert not console.runs_loading()


def _uncountable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server does not answer the index's counts (``RunsIndex.count``)."""

    async def refused(index: Any, pattern: str) -> int:
        raise WorldUnavailableError("no answer to a count (a test)")

    monkeypatch.setattr(runs_index.RunsIndex, "count", refused)


async def test_the_counts_are_marked_partial_while_it_loads_when_the_server_cannot_count(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's counts refused while the model loads: the counts are those of what the
    load has read so far, marked ``countsPartial`` from that call on (the console asks the
    world whether they are partial after the counts too), until it is loaded."""
    writer = await open_nats_world()
    await _fill(writer, 5, 3)
    stuck = _Stuck(monkeypatch)
    _uncountable(monkeypatch)
    console = await open_nats_world()
    async with _api(console) as http:
        for _ in range(2):
            loading = (await asyncio.wait_for(http.get("/api/runs?limit=3"), 30.0)).json()
            assert loading["countsPartial"] is True
            assert sum(loading["counts"].values()) < 8
        assert stuck.listed == 0
        assert console.runs_loading()
        stuck.release()
        assert await console.runs_followed(30.0) is not None
        loaded = (await http.get("/api/runs?limit=3")).json()
    assert loaded["countsPartial"] is False
    assert loaded["counts"] == {"completed": 2, "pending": 6}
    assert loaded["runs"] == loading["runs"]
    assert not console.runs_loading()


async def test_a_tail_that_cannot_be_read_falls_back_on_the_names(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_nats_world()
    await _fill(writer, 3, 3)
    want = await _walk(await open_nats_world(), 2)
    stuck = _Stuck(monkeypatch)

    async def refused(self: Any, start: int, batch: int) -> list[Any]:
        raise wayline.errors.WorldError("the index's stream cannot be read (a test)")

    monkeypatch.setattr(runs_tail.RunsTail, "_read", refused)
    console = await open_nats_world()
    await console.follow_runs()
    assert await asyncio.wait_for(_walk(console, 2), 30.0) == want
    assert stuck.listed > 0


async def test_the_load_holds_back_its_windows_while_a_page_is_read_from_the_tail(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's load and a page read from the tail share one event loop: the load asks for
    no window while the page is read (at 20,000 runs, windows decoded beside the page made it
    take seconds), and goes on once the page is answered."""
    writer = await open_nats_world()
    await _fill(writer, 3, 3)
    asked: list[int] = []
    tail_reading = asyncio.Event()
    let_tail = asyncio.Event()
    read_model, read_tail = runs_model.RunsModel._read, runs_tail.RunsTail._read

    async def counted(model: Any, start: int, batch: int) -> list[Any]:
        asked.append(start)
        return await read_model(model, start, batch)

    async def held(tail: Any, start: int, batch: int) -> list[Any]:
        tail_reading.set()
        await let_tail.wait()
        return await read_tail(tail, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", counted)
    monkeypatch.setattr(runs_tail.RunsTail, "_read", held)
    console = await open_nats_world()
    await console.follow_runs()
    page = asyncio.create_task(console.runs_page(after=None, limit=4))
    await asyncio.wait_for(tail_reading.wait(), 30.0)
    model = console._listing.model
    for _ in range(600):  # the load has read the stream's state: its windows come next
        if model._made is not None:
            break
        await asyncio.sleep(0.05)
    assert model._made is not None
    await asyncio.sleep(0.2)
    assert asked == [], "the load read a window while a page was read from the tail"
    let_tail.set()
    assert len(await asyncio.wait_for(page, 30.0)) == 4
    assert await console.runs_followed(30.0) is not None
    assert asked


async def test_reads_that_overlap_without_end_do_not_stop_the_load(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads that overlap without end (consoles that each read their first page every second
    while the counts are partial) hold the load back only for a bounded share of its time:
    the load ends, and the counts become exact, while a read is always under way."""
    writer = await open_nats_world()
    await _fill(writer, 3, 3)
    monkeypatch.setattr(runs_model, "HOLD_FREE", 0.2, raising=False)  # absent before
    monkeypatch.setattr(runs_model, "WINDOW", 2)  # three windows, each held back
    console = await open_nats_world()
    await console.follow_runs()
    model = console._listing.model
    assert model is not None
    async with model.paused():  # one read after another, overlapping: never none under way
        assert await console.runs_followed(30.0) is not None, "the reads stopped the load"
        assert not console.runs_loading()
    assert await console.count_runs() == await writer.count_runs()


async def test_counts_filtered_by_search_attributes_are_not_marked_partial_while_it_loads(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts filtered by search attributes are read from the attribute index, exact, while the
    runs model loads as before: the console does not mark them partial (a page that marks them
    so is read again each second, and shows a "+" on counts that are exact)."""
    writer = await open_nats_world()
    for i in range(4):
        data = {"workflow": _WF + "-where", "input": [i], "search": {"tenant": f"t{i % 2}"}}
        created = NewEvent(EventType.RUN_CREATED, data=data)
        await writer.append(new_run_id(), [created], expected_seq=0)
    assert await writer.flush_runs_index()
    stuck = _Stuck(monkeypatch)
    _uncountable(monkeypatch)  # the plain counts are the load's so far, marked partial
    console = await open_nats_world()
    async with _api(console) as http:
        await asyncio.wait_for(http.get("/api/runs?limit=3"), 30.0)  # read from the names
        plain = (await asyncio.wait_for(http.get("/api/runs?limit=3"), 30.0)).json()
        assert plain["countsPartial"] is True  # the model loads
        params = {"where": "tenant=t1", "limit": "3"}
        filtered = (await asyncio.wait_for(http.get("/api/runs", params=params), 30.0)).json()
        assert console.runs_loading()
        assert filtered["counts"] == {"pending": 2}
        assert filtered["countsPartial"] is False, "exact counts marked partial"
        stuck.release()
        assert await console.runs_followed(30.0) is not None


async def test_a_walk_on_the_tail_of_an_index_purged_meanwhile_still_shows_every_run(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs index's stream purged while a console's model loads: the tail reads down to
    an empty stream, and the walk's end reconciles the index with the log as the names' page
    does, so the walk goes on through every run instead of ending with the runs read before."""
    writer = await open_nats_world()
    ids = await _fill(writer, 16, 6)
    _Stuck(monkeypatch)
    console = await open_nats_world()
    await console.follow_runs()
    page = await asyncio.wait_for(console.runs_page(after=None, limit=3), 30.0)
    index = writer._listing.runs()
    await writer._listing._js().purge_stream(index.stream)  # every entry gone
    rows = [r.run_id for r in page]
    after = (page[-1].created_at, page[-1].run_id)
    while page := await asyncio.wait_for(console.runs_page(after=after, limit=3), 30.0):
        rows += [r.run_id for r in page]
        after = (page[-1].created_at, page[-1].run_id)
    assert sorted(rows) == sorted(ids), f"{len(rows)} of {len(ids)} runs"
