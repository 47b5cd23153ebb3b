"""The runs index held in memory (``runs_model``) against a real nats-server: a world that
follows its runs answers the runs page, its filters, its cursor and the counts as a world that
reads the index's names does, for the same world, while another process creates runs, moves
their statuses, changes their attributes and deletes them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.search_attributes import parse_all
from wayline.errors import WorldError
from wayline.worlds.nats import runs_index, runs_model

_WF = "runs-model-wf"
_OTHER = "runs-model-other"


def _created(workflow: str, i: int) -> list[NewEvent]:
    data = {"workflow": workflow, "input": [i], "search": {"tenant": f"t{i % 3}"}}
    return [NewEvent(EventType.RUN_CREATED, data=data)]


async def _answers(world: Any) -> dict[str, Any]:
    """Every answer of the runs page the model gives: pages of 2 by cursor under each filter
    (search attributes included) and the counts, of every run and of a search attribute."""
    out: dict[str, Any] = {}
    filters: list[dict[str, Any]] = [
        {},
        {"workflow": _WF},
        {"status": RunStatus.COMPLETED},
        {"status": RunStatus.PENDING, "workflow": _OTHER},
        {"status": RunStatus.FAILED},
    ]
    filters += [
        {"where": parse_all("tenant=t1")},
        {"where": parse_all("tenant=t2"), "workflow": _WF},
    ]
    for i, chosen in enumerate(filters):
        rows: list[tuple[str, str]] = []
        after = None
        while True:
            page = await world.runs_page(after=after, limit=2, **chosen)
            if not page:
                break
            rows += [(r.run_id, str(r.status)) for r in page]
            after = (page[-1].created_at, page[-1].run_id)
        out[f"page {i}"] = rows
    out["counts"] = await world.count_runs()
    out["counts of wf"] = await world.count_runs(workflow=_WF)
    out["counts where"] = await world.count_runs(where=parse_all("tenant=t1"))
    out["counts where of wf"] = await world.count_runs(workflow=_WF, where=parse_all("tenant=t2"))
    return out


async def _model(world: Any) -> runs_model.RunsModel:
    await world.follow_runs()
    model = await world.runs_followed(30.0)
    assert model is not None, "the runs index was not loaded in memory"
    return model  # type: ignore[no-any-return]


async def test_a_followed_world_answers_as_the_index_while_another_process_writes(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_model, "SWEEP_EVERY", 0.0)
    writer = await open_nats_world()  # another process: creates, moves, deletes
    console = await open_nats_world()  # follows the runs
    reader = await open_nats_world()  # reads the index's names, as before
    made = []
    for i in range(12):
        made.append(new_run_id())
        workflow = _WF if i % 2 else _OTHER
        await writer.append(made[-1], _created(workflow, i), expected_seq=0)
    assert await writer.flush_runs_index()
    model = await _model(console)
    assert len(model.runs) == 12
    assert await _answers(console) == await _answers(reader)

    # status moves, one twice (running, then completed), an attribute changed, new runs
    for run_id in made[:4]:
        done = [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]
        await writer.append(run_id, done, expected_seq=1)
    failed = [NewEvent(EventType.RUN_FAILED, data={"error": {"message": "no"}})]
    await writer.append(made[4], failed, expected_seq=1)
    tagged = [NewEvent(EventType.ATTRIBUTES_SET, data={"set": {"tenant": "t1"}})]
    await writer.append(made[6], tagged, expected_seq=1)
    for i in range(12, 15):
        made.append(new_run_id())
        await writer.append(made[-1], _created(_WF, i), expected_seq=0)
    assert await writer.flush_runs_index()
    first = await _answers(console)
    assert first == await _answers(reader)
    assert first["counts"] == {RunStatus.COMPLETED: 4, RunStatus.FAILED: 1, RunStatus.PENDING: 10}
    assert model.counts(None) == first["counts"]  # from memory, not the names

    # another process deletes the completed runs: the model cannot read a purge, the sweep
    # (started by a read, off its path) finds them gone
    assert await writer.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED]) == 4
    want = await _answers(reader)
    assert want["counts"] == {RunStatus.FAILED: 1, RunStatus.PENDING: 10}
    # the counts alone (no page shows a deleted run, which would drop it from the model)
    for _ in range(100):
        if await console.count_runs() == want["counts"]:
            break
        await asyncio.sleep(0.1)
    assert await console.count_runs() == want["counts"]
    assert await _answers(console) == want
    assert set(model.runs) == set(made) - set(made[:4])


async def test_a_late_entry_of_an_older_status_does_not_replace_the_newer_one(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    run_id = new_run_id()
    await world.append(run_id, _created(_WF, 0), expected_seq=0)
    stale = await world.get_run(run_id)
    done = [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]
    await world.append(run_id, done, expected_seq=1)
    assert await world.flush_runs_index()
    model = await _model(world)
    # a repair from a read made before the completion lands after it, as a late writer's
    await world._listing.runs().moved(stale)
    assert await world.count_runs(workflow=_WF) == {RunStatus.COMPLETED: 1}
    page = await world.runs_page(after=None, limit=5, status=RunStatus.COMPLETED)
    assert [r.run_id for r in page] == [run_id]
    assert model.runs[run_id].status is RunStatus.COMPLETED


async def test_runs_this_process_deletes_leave_the_model_at_once(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(3)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF, i), expected_seq=0)
    done = [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]
    await world.append(ids[0], done, expected_seq=1)
    model = await _model(world)
    assert await world.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED]) == 1
    assert ids[0] not in model.runs
    assert await world.count_runs(workflow=_WF) == {RunStatus.PENDING: 2}


async def test_the_model_loads_an_index_larger_than_one_window(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_model, "WINDOW", 7)  # many windows, read concurrently
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(40)]
    await asyncio.gather(
        *(world.append(r, _created(_WF, i), expected_seq=0) for i, r in enumerate(ids))
    )
    assert await world.flush_runs_index()
    model = await _model(world)
    assert set(model.runs) == set(ids)
    listed = await world.list_runs(workflow=_WF, limit=100)
    page = await world.runs_page(after=None, limit=100, workflow=_WF)
    assert [r.run_id for r in page] == [r.run_id for r in listed]


async def test_a_page_read_while_the_model_does_not_load_is_answered_whole(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that fails: the page is read from the index's newest entries, and the counts,
    once the load has failed, from the index's names (exact, not marked partial)."""
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(3)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF, i), expected_seq=0)

    async def refused(self: Any, start: int, batch: int) -> list[Any]:
        raise WorldError("refused on purpose")

    monkeypatch.setattr(runs_model.RunsModel, "_read", refused)
    await world.follow_runs()
    page = await world.runs_page(after=None, limit=10, workflow=_WF)
    assert sorted(r.run_id for r in page) == sorted(ids)
    model = world._listing.model
    for _ in range(200):
        if model.failed:
            break
        await asyncio.sleep(0.05)
    assert model.failed and not world.runs_loading()
    assert await world.count_runs(workflow=_WF) == {RunStatus.PENDING: 3}
    assert await world.runs_followed(0.0) is None
    monkeypatch.undo()  # the server answers again: the next read starts the load again
    await world.follow_runs()
    model = await world.runs_followed(30.0)
    assert model is not None and set(model.runs) == set(ids)


async def test_hostile_entries_in_the_index_stream_leave_pages_and_counts_whole(
    open_nats_world: OpenWorlds,
) -> None:
    """Bytes no writer made, published onto the index's stream: a time token that decodes to
    NaN or infinity, bad JSON, a huge body, subjects of the wrong shape. A run named so is no
    run: the pages, their cursor and the counts answer as without them, and nothing raises."""
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(4)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF, i), expected_seq=0)
    assert await world.flush_runs_index()
    model = await _model(world)
    index = world._listing.runs()
    prefix = index.names.prefix
    ghost = new_run_id()
    hostile = [
        (f"{prefix}.ri.running.{_WF}.7ff8000000000000.{ghost}", b"{}"),  # NaN
        (f"{prefix}.ri.running.{_WF}.fff8000000000000.{new_run_id()}", b""),  # -NaN
        (f"{prefix}.ri.running.{_WF}.7ff0000000000000.{new_run_id()}", b"x"),  # infinity
        (f"{prefix}.ri.pending.{_WF}.7ff8000000000000.{ids[0]}", b'{"seq": 99}'),
        (f"{prefix}.ri.running.{_WF}.zz.{new_run_id()}", b"not json {"),
        (f"{prefix}.ri.running", b"\xff\xfe"),
        (f"{prefix}.ri.running.=hdeadbeef.3ff0000000000000.=hbeef", b'{"run": 5}'),
        (
            f"{prefix}.ri.failed.{_WF}.3ff0000000000000.{new_run_id()}",
            b'{"seq": "' + b"9" * 300_000,
        ),
    ]
    for subject, data in hostile:
        await world._js.publish(subject, data, stream=index.stream)
    want = sorted(ids)
    for _ in range(2):  # the second time after the first page dropped what it found gone
        rows: list[str] = []
        after = None
        while True:
            page = await world.runs_page(after=after, limit=1, workflow=_WF)
            if not page:
                break
            rows += [r.run_id for r in page]
            after = (page[-1].created_at, page[-1].run_id)
        assert sorted(rows) == want and len(rows) == len(want)
        pending = await world.runs_page(after=None, limit=10, status=RunStatus.PENDING)
        assert sorted(r.run_id for r in pending) == want
    assert all(held.created_at == held.created_at for held in model.runs.values())  # no NaN
    assert model.runs[ids[0]].status is RunStatus.PENDING
    counts = await world.count_runs(workflow=_WF)
    assert counts.get(RunStatus.PENDING) == 4
    assert ghost not in model.runs


async def test_a_followed_world_reads_an_index_stream_made_again_from_its_start(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's stream deleted and made again (``nats stream rm``, then a process that
    starts provisions it and reconciliation writes it again from the log): its sequences
    start again from 1, below the last one the model read, and the model must read them."""
    monkeypatch.setattr(runs_model, "SWEEP_EVERY", 0.0)
    console = await open_nats_world()
    writer = await open_nats_world()
    old = [new_run_id() for _ in range(6)]
    done = [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]
    for i, run_id in enumerate(old):
        await writer.append(run_id, _created(_WF, i), expected_seq=0)
        assert await writer.flush_runs_index()  # two entries a run: the stream's seq runs on
        await writer.append(run_id, done, expected_seq=1)
        assert await writer.flush_runs_index()
    model = await _model(console)
    assert set(model.runs) == set(old)
    stream = writer._listing.runs().stream
    await writer._js.delete_stream(stream)
    again = await open_nats_world()  # provisions the index's stream again, empty
    new = [new_run_id() for _ in range(2)]
    for i, run_id in enumerate(new):
        await again.append(run_id, _created(_WF, 10 + i), expected_seq=0)
    assert await again.flush_runs_index()
    await again.runs_page(after=None, limit=1)  # reconciles: the old runs' entries again
    assert (await again._listing.runs().state())["last_seq"] <= model.seq
    want = sorted(old + new)
    for _ in range(100):
        page = await console.runs_page(after=None, limit=20, workflow=_WF)
        if sorted(r.run_id for r in page) == want:
            break
        await asyncio.sleep(0.1)
    assert sorted(r.run_id for r in page) == want
    for _ in range(100):
        if await console.count_runs(workflow=_WF) == {RunStatus.COMPLETED: 6, RunStatus.PENDING: 2}:
            break
        await asyncio.sleep(0.1)
    assert await console.count_runs(workflow=_WF) == {
        RunStatus.COMPLETED: 6,
        RunStatus.PENDING: 2,
    }
    assert set(model.runs) == set(want)


def _windows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the model load by windows of messages: the index's names seem to take two pages
    and the stream to change between the two reads of its state."""
    listed, state = runs_index.RunsIndex.listed, runs_index.RunsIndex.state
    reads = [0]

    async def paged(index: Any, stream: str, pattern: str) -> tuple[list[str], int]:
        return (await listed(index, stream, pattern))[0], 2

    async def changing(index: Any) -> dict[str, Any]:
        reads[0] += 1
        return {**await state(index), "num_msgs": reads[0]}

    monkeypatch.setattr(runs_index.RunsIndex, "listed", paged)
    monkeypatch.setattr(runs_index.RunsIndex, "state", changing)


async def test_a_load_that_fails_half_way_leaves_nothing_behind_and_loads_again(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One window of the load refused while the others are still being read: the load
    fails, none of its other windows lands in the model afterwards (they would land in a
    model whose orders a later load already sorted, leaving their runs out of every page),
    and the next read loads it whole. The windows are the load's way when the index's names
    take several pages and the stream changes meanwhile (``_windows_only``)."""
    monkeypatch.setattr(runs_model, "WINDOW", 3)
    _windows_only(monkeypatch)
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(12)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF, i), expected_seq=0)
    assert await world.flush_runs_index()
    real = runs_model.RunsModel._read
    first = int((await world._listing.runs().state())["first_seq"])
    slow = asyncio.Event()

    async def failing(self: Any, start: int, batch: int) -> list[Any]:
        if start == first:
            raise WorldError("refused on purpose")
        await slow.wait()
        return await real(self, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", failing)
    await world.follow_runs()
    assert await world.runs_followed(5.0) is None
    model = world._listing.model
    slow.set()
    for _ in range(20):
        await asyncio.sleep(0.05)
    assert model.runs == {}  # the failed load's other windows were stopped
    monkeypatch.setattr(runs_model.RunsModel, "_read", real)
    assert await world.runs_followed(30.0) is model
    page = await world.runs_page(after=None, limit=20, workflow=_WF)
    assert sorted(r.run_id for r in page) == sorted(ids)


async def test_a_world_closed_while_its_model_loads_leaves_no_task(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The world closed during the load: the model's tasks end with the close, none is left
    pending or started after it, and a read waiting for the load gets False (the model is
    not there), not a cancellation of its own request."""
    world = await open_nats_world()
    run_id = new_run_id()
    await world.append(run_id, _created(_WF, 0), expected_seq=0)
    assert await world.flush_runs_index()
    before = asyncio.all_tasks()
    stuck = asyncio.Event()

    async def hangs(self: Any, start: int, batch: int) -> list[Any]:
        await stuck.wait()
        return []

    monkeypatch.setattr(runs_model.RunsModel, "_read", hangs)
    await world.follow_runs()
    model = world._listing.model
    waiting = asyncio.create_task(model.ready(60.0))
    await asyncio.sleep(0.1)
    await world.close()
    assert await asyncio.wait_for(waiting, 5.0) is False  # not cancelled itself
    assert await model.ready(1.0) is False  # and no load starts on the closed world
    model.upkeep(asyncio.sleep)  # a read in flight past the close starts no upkeep
    for _ in range(10):
        await asyncio.sleep(0)
    left = {t for t in asyncio.all_tasks() - before if not t.done()}
    left.discard(asyncio.current_task())  # type: ignore[arg-type]
    assert not left, left
    assert world._listing.model is None


async def _three_processes(
    open_nats_world: OpenWorlds, count: int
) -> tuple[Any, Any, Any, list[str]]:
    """A writer (another process), a console that will follow the runs and a reader of the
    index's names, with ``count`` pending runs of ``_WF`` the writer created."""
    writer = await open_nats_world()
    console = await open_nats_world()
    reader = await open_nats_world()
    ids = [new_run_id() for _ in range(count)]
    for i, run_id in enumerate(ids):
        await writer.append(run_id, _created(_WF, i), expected_seq=0)
    return writer, console, reader, ids


async def test_statuses_that_move_back_are_followed_from_another_process(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that go running, paused, running, paused and running again,
    written by another process between the console's reads: the console's pages by status and
    its counts follow each move as the index's names do, a run never on two pages or none."""
    monkeypatch.setattr(runs_model, "SWEEP_EVERY", 0.0)
    writer, console, reader, ids = await _three_processes(open_nats_world, 4)
    assert await writer.flush_runs_index()
    await _model(console)
    seqs = dict.fromkeys(ids, 1)

    async def move(run_id: str, kind: EventType, data: dict[str, Any]) -> None:
        await writer.append(run_id, [NewEvent(kind, data=data)], expected_seq=seqs[run_id])
        seqs[run_id] += 1

    moves: list[tuple[EventType, dict[str, Any]]] = [
        (EventType.RUN_STARTED, {}),
        (EventType.RUN_PAUSED, {"statusBefore": "running"}),
        (EventType.RUN_UNPAUSED, {"status": "running"}),
        (EventType.RUN_PAUSED, {"statusBefore": "running"}),
        (EventType.RUN_UNPAUSED, {"status": "running"}),
    ]
    for step, (kind, data) in enumerate(moves):
        for run_id in ids[:3]:  # the fourth stays pending
            await move(run_id, kind, data)
        await writer.flush_runs_index()
        want = await _answers(reader)
        got = await _answers(console)
        assert got == want, f"after move {step}"
        assert sum(got["counts"].values()) == 4
        statuses = [RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED]
        rows = [
            r.run_id
            for s in statuses
            for r in await console.runs_page(after=None, limit=10, status=s, workflow=_WF)
        ]
        assert sorted(rows) == sorted(ids), f"after move {step}"


async def test_counts_stay_whole_after_the_index_stream_is_purged(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nats stream purge`` of the index's stream under a followed world, then a run created
    and one deleted by another process: once reconciliation writes the index again from the
    log, the console's counts and pages are the log's, as the index's names are."""
    monkeypatch.setattr(runs_model, "SWEEP_EVERY", 0.0)
    writer, console, reader, ids = await _three_processes(open_nats_world, 5)
    done = [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})]
    await writer.append(ids[0], done, expected_seq=1)
    assert await writer.flush_runs_index()
    await _model(console)
    await writer._js.purge_stream(writer._listing.runs().stream)
    late = new_run_id()
    await writer.append(late, _created(_WF, 9), expected_seq=0)
    assert await writer.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED]) == 1
    assert await writer.flush_runs_index()
    want = {RunStatus.PENDING: 5}
    for _ in range(100):
        if await console.count_runs(workflow=_WF) == want:
            break
        await asyncio.sleep(0.1)
    assert await console.count_runs(workflow=_WF) == want
    assert await _answers(console) == await _answers(reader)


async def test_a_page_read_while_the_model_loads_is_answered_at_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A console's first calls do not wait for the model's load: until it is loaded, a
    page is read from the index's newest entries (or its names, when it lies deeper) and is
    the same, and the counts are the index's, counted by the server, and the same too (not
    partial: ``runs_loading`` is False; tests/nats/test_runs_first_pages.py)."""
    world = await open_nats_world()
    ids = [new_run_id() for _ in range(3)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF, i), expected_seq=0)
    assert await world.flush_runs_index()
    reader = await open_nats_world()  # a world that does not follow: the names' answers
    expected = await _answers(reader)
    loading = asyncio.Event()
    stuck = asyncio.Event()
    real = runs_model.RunsModel._read

    async def slow(self: Any, start: int, batch: int) -> list[Any]:
        loading.set()
        await stuck.wait()  # a load that is not done while the reads below are made
        return await real(self, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", slow)
    await world.follow_runs()
    await asyncio.wait_for(loading.wait(), 10.0)
    # bounded only so that a read that waits for the load fails here instead of hanging
    answered = await asyncio.wait_for(_answers(world), 30.0)
    assert not world.runs_loading()
    assert answered == expected
    assert world._listing.model is not None and not world._listing.model.loaded
    stuck.set()
    await _model(world)  # the load then ends, and the model answers the same
    assert await _answers(world) == expected


async def _walk(world: Any, pages: list[str], let_load: asyncio.Event, **chosen: Any) -> list[str]:
    """Every run by pages of 2, each page's source noted in ``pages`` (the model when it is
    loaded at the read, else the index's names); after two pages ``let_load`` lets the
    model's load end, and the walk waits for it."""
    rows: list[str] = []
    after = None
    while True:
        model = world._listing.model
        pages.append("model" if model is not None and model.loaded else "names")
        page = await world.runs_page(after=after, limit=2, **chosen)
        if not page:
            return rows
        rows += [r.run_id for r in page]
        after = (page[-1].created_at, page[-1].run_id)
        if len(rows) == 4:  # the load ends between two pages of the walk
            let_load.set()
            await _model(world)


@pytest.mark.parametrize("partitions", [1, 3])
async def test_pages_walked_across_the_models_load_show_each_run_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """A walk of the runs page by cursor that starts while the model loads (pages from the
    index's names) and goes on once it is loaded (pages from the model) shows every run
    once, in the order a world that does not follow gives: a cursor of the names' pages is a
    cursor of the model's. So on a world of 3 partitions, whose runs' logs are in 3 streams."""
    world = await open_nats_world(partitions=partitions)
    ids = [new_run_id() for _ in range(9)]
    for i, run_id in enumerate(ids):
        await world.append(run_id, _created(_WF if i % 2 else _OTHER, i), expected_seq=0)
    assert await world.flush_runs_index()
    reader = await open_nats_world(partitions=partitions)
    expected: dict[str, list[str]] = {"all": [], "wf": []}
    for key, chosen in (("all", {}), ("wf", {"workflow": _WF})):
        after = None
        while page := await reader.runs_page(after=after, limit=2, **chosen):
            expected[key] += [r.run_id for r in page]
            after = (page[-1].created_at, page[-1].run_id)
    assert sorted(expected["all"]) == sorted(ids)
    real = runs_model.RunsModel._read
    let_load = asyncio.Event()

    async def slow(self: Any, start: int, batch: int) -> list[Any]:
        await let_load.wait()  # the load ends only when the walk lets it
        return await real(self, start, batch)

    for key, chosen in (("all", {}), ("wf", {"workflow": _WF})):
        follower = await open_nats_world(partitions=partitions)
        let_load.clear()
        monkeypatch.setattr(runs_model.RunsModel, "_read", slow)
        await follower.follow_runs()
        pages: list[str] = []
        walked = await asyncio.wait_for(_walk(follower, pages, let_load, **chosen), 60.0)
        monkeypatch.setattr(runs_model.RunsModel, "_read", real)
        assert pages[0] == "names" and pages[-1] == "model", pages
        assert walked == expected[key], key


async def test_a_model_whose_load_fails_leaves_the_answers_whole_and_loads_later(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that fails (the index's stream unreadable for a moment) is no failure of the
    reads: they are answered from the index's names, the same answers, and a later read
    starts the load again, which then succeeds."""
    world = await open_nats_world(partitions=3)
    for i in range(5):
        await world.append(new_run_id(), _created(_WF, i), expected_seq=0)
    assert await world.flush_runs_index()
    reader = await open_nats_world(partitions=3)
    expected = await _answers(reader)
    real = runs_model.RunsModel._read
    failed = 0

    async def broken(self: Any, start: int, batch: int) -> list[Any]:
        nonlocal failed
        failed += 1
        raise WorldError("the index's stream cannot be read (a test)")

    monkeypatch.setattr(runs_model.RunsModel, "_read", broken)
    await world.follow_runs()
    model = world._listing.model
    for _ in range(100):
        if failed and model._task is not None and model._task.done():
            break
        await asyncio.sleep(0.05)
    assert failed and not model.loaded
    assert await _answers(world) == expected
    monkeypatch.setattr(runs_model.RunsModel, "_read", real)
    await _answers(world)  # a read starts the load again
    assert (await _model(world)).loaded
    assert await _answers(world) == expected
