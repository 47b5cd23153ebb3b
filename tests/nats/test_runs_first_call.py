"""A console's first runs call right after it starts, against a real nats-server: its page
(from the runs index's newest entries) and its counts (counted by the server from the index,
``RunsIndex.counts``) are the answers the loaded runs model gives, on a world with runs in
every status, runs that changed status several times, deleted runs and runs written while the
load is under way; and the model loads from the index's names, not from every message of its
stream (docs/nats.md, "The runs index's read model")."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest

from tests.nats.test_runs_first_pages import _api
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_index, runs_model, runs_tail

_WF = "first-call-wf"
_OTHER = "first-call-other"

T = EventType
_STARTED = NewEvent(T.RUN_STARTED)
_PATHS: dict[RunStatus, list[list[NewEvent]]] = {
    # each list after ``run_created`` is one append: the run's status changes at each
    RunStatus.PENDING: [],
    RunStatus.RUNNING: [[_STARTED]],
    RunStatus.BLOCKED: [
        [_STARTED],
        [NewEvent(T.RUN_BLOCKED, data={"code": "DEFINITION_MISMATCH", "message": "a test"})],
    ],
    RunStatus.PAUSED: [
        [_STARTED],
        [NewEvent(T.RUN_PAUSED, data={"reason": "a test", "statusBefore": "running"})],
    ],
    RunStatus.COMPENSATING: [
        [_STARTED],
        [NewEvent(T.RUN_COMPENSATING, data={"reason": "cancelled"})],
    ],
    RunStatus.COMPENSATION_STUCK: [
        [_STARTED],
        [NewEvent(T.RUN_COMPENSATING, data={"reason": "cancelled"})],
        [NewEvent(T.RUN_COMPENSATION_STUCK, data={"step": "a", "error": {"message": "x"}})],
    ],
    RunStatus.COMPLETED: [[_STARTED], [NewEvent(T.RUN_COMPLETED, data={"output": 1})]],
    RunStatus.FAILED: [
        [_STARTED],
        [NewEvent(T.RUN_FAILED, data={"error": {"type": "E", "message": "on purpose"}})],
    ],
    RunStatus.CANCELLED: [[_STARTED], [NewEvent(T.RUN_CANCELLED)]],
    RunStatus.CONTINUED_AS_NEW: [
        [_STARTED],
        [NewEvent(T.RUN_CONTINUED_AS_NEW, data={"nextRunId": "wf_next", "next": {}})],
    ],
}


async def _make(world: Any, status: RunStatus, i: int) -> str:
    """A run brought to ``status`` by one append per change (pause and unpause on the way
    for some: a run that was running, paused and running again)."""
    run_id = new_run_id()
    flow = _WF if i % 2 else _OTHER
    created = NewEvent(T.RUN_CREATED, data={"workflow": flow, "input": [i]})
    await world.append(run_id, [created], expected_seq=0)
    for n, events in enumerate(_PATHS[status]):
        if n == 1 and i % 3 == 0:  # running, paused, running again first
            paused = {"reason": "a test", "statusBefore": "running"}
            await world.append(run_id, [NewEvent(T.RUN_PAUSED, data=paused)])
            await world.append(run_id, [NewEvent(T.RUN_UNPAUSED, data={"status": "running"})])
        await world.append(run_id, events)
    return run_id


async def _fill(world: Any, each: int) -> list[str]:
    ids = []
    for i in range(each):
        for status in _PATHS:
            ids.append(await _make(world, status, i))
    assert await world.flush_runs_index()
    return ids


async def _calls(http: httpx.AsyncClient) -> dict[str, Any]:
    """The console's first calls: the first page with the counts, of every run, of each
    status and of a workflow."""
    out = {"all": (await http.get("/api/runs", params={"limit": "7"})).json()}
    for status in _PATHS:
        params = {"status": str(status), "limit": "3"}
        out[str(status)] = (await http.get("/api/runs", params=params)).json()
    out[_WF] = (await http.get("/api/runs", params={"workflow": _WF})).json()
    return out


class _Held:
    """Holds the console's model's load after it read the stream's state, before the
    index's names, until ``release`` (on a runtime whose model reads no names, before the
    load: the test then shows what that runtime answers)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()
        held = self
        where: Any = runs_index.RunsIndex
        name = "listed" if hasattr(where, "listed") else "_fill"
        if name == "_fill":
            where = runs_model.RunsModel
        real = getattr(where, name)

        async def waiting(*args: Any) -> Any:
            held.reached.set()
            await held.gate.wait()
            return await real(*args)

        monkeypatch.setattr(where, name, waiting)

    def release(self) -> None:
        self.gate.set()


async def test_the_first_call_answers_as_the_loaded_model_in_every_status(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_tail, "SKEW", 0.2)
    writer = await open_nats_world()
    await _fill(writer, 3)
    gone = [await _make(writer, RunStatus.COMPLETED, 100 + i) for i in range(3)]
    assert await writer.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED]) == 6
    await asyncio.sleep(0.3)  # past the tail's skew: the newest runs come next
    await _fill(writer, 2)  # completed runs again, after the deletion
    held = _Held(monkeypatch)
    console = await open_nats_world()
    async with _api(console) as http:
        first = await asyncio.wait_for(_calls(http), 30.0)
        await asyncio.wait_for(held.reached.wait(), 30.0)  # the load, held before the names
        model = console._listing.model
        assert model is not None and not model.loaded
        assert {k: v["countsPartial"] for k, v in first.items()} == dict.fromkeys(first, False)
        counted = first["all"]["counts"]
        assert set(counted) == {str(s) for s in _PATHS}, "a status has no run"
        assert counted["completed"] == 2 and counted["pending"] == 5
        assert sum(counted.values()) == 47
        assert not {r["runId"] for r in first["all"]["runs"]} & set(gone)

        # runs written and moved while the load is under way (held before the names)
        late = [await _make(writer, status, 7) for status in _PATHS]
        moved = late[0]  # pending, now completed
        await writer.append(moved, [_STARTED])
        await writer.append(moved, [NewEvent(T.RUN_COMPLETED, data={"output": 2})])
        assert await writer.flush_runs_index()
        await asyncio.sleep(0.3)
        loading = await asyncio.wait_for(_calls(http), 30.0)
        assert not model.loaded
        assert loading["all"]["counts"]["completed"] == 4
        held.release()
        assert await console.runs_followed(30.0) is model
        loaded = await _calls(http)
    assert loading == loaded
    expected = {status: n + 1 for status, n in counted.items()}
    expected["completed"], expected["pending"] = counted["completed"] + 2, counted["pending"]
    assert loaded["all"]["counts"] == expected


async def test_the_model_loads_from_the_index_s_names_and_reads_past_them(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load reads the index's names (one stream-info answer) instead of every message of
    its stream: the only messages it reads are those written past the stream's last sequence
    it read before the names, and its runs, statuses and counts are the loaded model's."""
    writer = await open_nats_world()
    await _fill(writer, 2)
    read: list[int] = []
    real = runs_model.RunsModel._read

    async def counted(model: Any, start: int, batch: int) -> list[Any]:
        msgs = await real(model, start, batch)
        read.extend(m.seq for m in msgs)
        return msgs

    monkeypatch.setattr(runs_model.RunsModel, "_read", counted)
    last = int((await writer._listing.runs().state())["last_seq"])
    held = _Held(monkeypatch)
    console = await open_nats_world()
    await console.follow_runs()
    await asyncio.wait_for(held.reached.wait(), 30.0)
    late = await _make(writer, RunStatus.FAILED, 9)  # written past the state the load read
    assert await writer.flush_runs_index()
    held.release()
    model = await console.runs_followed(30.0)
    assert model is not None
    assert read and min(read) > last, "the load read messages the names gave it"
    reader = await open_nats_world()  # follows nothing: the index's names
    assert model.counts(None) == await reader.count_runs()
    assert model.runs[late].status is RunStatus.FAILED
    assert model.runs[late].log_seq != runs_model.UNREAD  # read from its message


async def test_a_late_repair_of_an_older_status_does_not_replace_a_run_taken_from_the_names(
    open_nats_world: OpenWorlds,
) -> None:
    """A run the model took from the index's names (its log position not read) and a repair
    written later from an older read of its log (``RunsIndex.put`` purges it soon after): the
    model reads the held entry's body first and keeps the newer status, as it does when it
    reads every message."""
    writer = await open_nats_world()
    run_id = await _make(writer, RunStatus.COMPLETED, 1)
    assert await writer.flush_runs_index()
    info, _ = await writer.read_run(run_id)
    assert info is not None and info.status is RunStatus.COMPLETED
    console = await open_nats_world()
    await console.follow_runs()
    model = await console.runs_followed(30.0)
    assert model is not None and model.runs[run_id].log_seq == runs_model.UNREAD
    index = writer._listing.runs()
    older = dataclasses.replace(info, status=RunStatus.RUNNING, last_seq=2)
    # the stale entry written as a late repair would, without its purge (``moved``)
    await index.moved(older)
    assert await console.count_runs() == {RunStatus.COMPLETED: 1}
    assert model.runs[run_id].status is RunStatus.COMPLETED
    assert model.runs[run_id].log_seq == info.last_seq


async def test_entries_written_while_the_names_are_read_are_read_past_them(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run named twice has its last entries read after the names: one of them may have been
    written after a status change of another run, and that change is still read (the stream
    is read on from the sequence the load had before the names, not from the later entry)."""
    writer = await open_nats_world()
    twice = await _make(writer, RunStatus.COMPLETED, 1)
    moving = await _make(writer, RunStatus.PENDING, 2)
    assert await writer.flush_runs_index()
    info, _ = await writer.read_run(twice)
    assert info is not None
    stale = dataclasses.replace(info, status=RunStatus.RUNNING, last_seq=2)
    index = writer._listing.runs()
    await index.moved(stale)  # the run named twice (a purge lost)
    gate, reached = asyncio.Event(), asyncio.Event()
    last = runs_model.RunsModel._last

    async def held(model: Any, subjects: list[str]) -> list[Any]:
        if subjects:
            reached.set()
            await gate.wait()
        return await last(model, subjects)

    monkeypatch.setattr(runs_model.RunsModel, "_last", held)
    console = await open_nats_world()
    await console.follow_runs()
    await asyncio.wait_for(reached.wait(), 30.0)
    await writer.append(moving, [_STARTED])  # after the names, before the twice-named entries
    assert await writer.flush_runs_index()
    await index.moved(stale)  # the stale entry again: later than the change above
    gate.set()
    model = await console.runs_followed(30.0)
    assert model is not None
    assert model.runs[moving].status is RunStatus.RUNNING
    assert model.runs[twice].status is RunStatus.COMPLETED


async def test_runs_whose_names_are_hashed_are_loaded_from_their_entries(
    open_nats_world: OpenWorlds,
) -> None:
    """A run id or workflow too long for a subject token is hashed in the index's name: the
    names' load reads such a run's entry for its id and workflow, and holds it as a load of
    every message does."""
    writer = await open_nats_world()
    long_id, long_flow = "r" * 121, "w" * 121
    created = NewEvent(T.RUN_CREATED, data={"workflow": _WF, "input": []})
    await writer.append(long_id, [created], expected_seq=0)
    other = new_run_id()
    created = NewEvent(T.RUN_CREATED, data={"workflow": long_flow, "input": []})
    await writer.append(other, [created], expected_seq=0)
    await writer.append(other, [_STARTED])
    short = await _make(writer, RunStatus.FAILED, 1)
    assert await writer.flush_runs_index()
    console = await open_nats_world()
    await console.follow_runs()
    model = await console.runs_followed(30.0)
    assert model is not None
    assert model.runs[long_id].workflow == _WF
    assert model.runs[other].workflow == long_flow
    assert model.runs[other].status is RunStatus.RUNNING
    assert model.runs[long_id].log_seq != runs_model.UNREAD  # read from its entry
    assert model.runs[short].log_seq == runs_model.UNREAD  # placed by its name
    reader = await open_nats_world()
    assert await console.count_runs() == await reader.count_runs()
    page = await console.runs_page(after=None, limit=10, workflow=long_flow)
    assert [r.run_id for r in page] == [other]


async def test_a_run_this_process_deletes_while_its_model_loads_leaves_the_model(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run the console's own process deletes after the load had the index's names (the
    names still list it) and before the load placed it is not held once the model is loaded:
    a run this process deletes leaves the model at once (docs/nats.md, "Purges are not read
    forward"), and its counts do not count it until a sweep, up to SWEEP_EVERY later."""
    writer = await open_nats_world()
    kept = await _make(writer, RunStatus.COMPLETED, 1)
    gone = await _make(writer, RunStatus.CANCELLED, 2)
    assert await writer.flush_runs_index()
    console = await open_nats_world()
    index = console._listing.runs()
    gate, reached = asyncio.Event(), asyncio.Event()
    real = runs_index.RunsIndex.listed

    async def held(self: Any, stream: str, pattern: str) -> Any:
        out = await real(self, stream, pattern)
        if self is index and pattern == runs_index.wildcard(self.names) and not reached.is_set():
            reached.set()  # the names are answered; the load has not placed them yet
            await gate.wait()
        return out

    monkeypatch.setattr(runs_index.RunsIndex, "listed", held)
    await console.follow_runs()
    await asyncio.wait_for(reached.wait(), 30.0)
    assert await console.delete_runs(older_than=0.0, statuses=[RunStatus.CANCELLED]) == 1
    gate.set()
    model = await console.runs_followed(30.0)
    assert model is not None
    assert await console.count_runs() == {RunStatus.COMPLETED: 1}
    assert set(model.runs) == {kept}, f"{gone} deleted by this process is still held"
