"""Adversarial races on starting runs, on both worlds: one run per id whoever starts it and
however often (the first start's input wins: a start with other arguments answers the first
run), no step body twice, no run left without its queue message."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import hold_sweep
from tests.runtime import start_flows as sf
from tests.runtime.harness import Engine, of_type, wait_for
from tests.runtime.procs import Procs
from wayline._core.events import EventType
from wayline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _id() -> str:
    return "wf_" + uuid.uuid4().hex


async def _every_wake_handled(world: Any, run_ids: list[str], sending: list[int]) -> None:
    """Until no stored message (queued, delayed or held by a worker) names any of ``run_ids``
    and none is being sent (``sending``: sends under way): every wake of those runs has been
    handled, which a fixed sleep only hoped for (a second of it, too short under load and too
    long on a quiet machine). A run that has ended is not re-armed, so no new wake comes."""

    async def handled() -> bool:
        named = await world.runs_with_messages()
        assert named is not None, "the world cannot say which runs have messages"
        return sending[0] == 0 and not named.intersection(run_ids)

    await wait_for(handled, timeout=30)


async def test_clients_racing_one_id_with_other_inputs_get_the_first_run(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    clients = [engine.client] + [wayline.Client(await engine.make_world()) for _ in range(2)]
    ids = [_id() for _ in range(12)]
    async with (
        engine.worker(sf.WORKFLOWS),
        engine.worker(sf.WORKFLOWS, world=await engine.make_world()),
    ):
        handles = await asyncio.gather(
            *(
                c.start_with(
                    wayline.StartOptions(run_id=run_id), sf.st_counted, path, f"{run_id}-{n}"
                )
                for run_id in ids
                for n, c in enumerate(clients + clients[:1])  # one client twice
            )
        )
        results = await asyncio.gather(*(h.result(timeout=30) for h in handles))
    per_id: dict[str, set[str]] = {}
    for h, r in zip(handles, results, strict=True):
        per_id.setdefault(h.run_id, set()).add(r)
    for run_id in ids:
        events = await engine.world.list_events(run_id)
        [created] = of_type(events, EventType.RUN_CREATED)
        first = created.data["input"]
        assert len(per_id[run_id]) == 1, per_id[run_id]  # every caller got the one run
        (tag,) = per_id[run_id]
        assert tag.startswith(run_id)
        assert len(of_type(events, EventType.RUN_STARTED)) == 1
        assert str(first).count(tag) == 1, (first, tag)
    assert sum(h._fresh for h in handles) <= len(ids)
    bodies = Counter(sf.lines(path))
    assert sorted(bodies) == sorted(f"body {next(iter(per_id[i]))}" for i in ids)
    assert set(bodies.values()) == {1}, bodies
    assert len(await engine.world.list_runs(limit=1000)) == len(ids)


async def _ended_once(engine: Engine, path: str, run_id: str, tag: str) -> None:
    handle = await engine.client.start_with(
        wayline.StartOptions(run_id=run_id), sf.st_counted, path, tag
    )
    assert await handle.result(timeout=20) == tag


async def test_a_start_between_a_cleanups_purge_and_its_queue_sweep_keeps_its_message(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup deletes an ended run; its id is started again after the run's log was purged
    but before the cleanup swept the queue for the deleted run's messages, while the live
    worker is busy elsewhere (its receive held back). The new run's start message is not the
    old run's: it stays, and the new run ends. On NATS the sweep removed it, and the new run
    stayed pending for good (only a worker's start re-arms such a run); SQLite deletes in one
    transaction."""
    path, run_id = str(tmp_path / "m"), _id()
    busy = asyncio.Event()
    busy.set()
    worker_world = await engine.make_world()
    receive = worker_world.receive

    receiving = [0]  # receives under way (past the hold)

    async def held(*args: object, **kwargs: object) -> object:
        await busy.wait()
        receiving[0] += 1
        try:
            return await receive(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            receiving[0] -= 1

    monkeypatch.setattr(worker_world, "receive", held)
    async with engine.worker(sf.WORKFLOWS, world=worker_world):
        await _ended_once(engine, path, run_id, "old")
        busy.clear()
        for _ in range(600):  # receives under way end (each waits at most 0.5 s)
            if receiving[0] == 0:
                break
            await asyncio.sleep(0.05)
        assert receiving[0] == 0, "a receive did not end"
        if engine.world.url.startswith("nats"):
            purged, go_on = hold_sweep(monkeypatch)
        else:
            purged, go_on = asyncio.Event(), asyncio.Event()
            purged.set()
        cleanup = asyncio.ensure_future(engine.world.delete_runs(older_than=0))
        await asyncio.wait_for(purged.wait(), 10)
        other = wayline.Client(await engine.make_world())
        handle = await other.start_with(
            wayline.StartOptions(run_id=run_id), sf.st_counted, path, "new"
        )
        go_on.set()
        assert await cleanup == 1
        woken = await engine.world.runs_with_messages()
        assert woken is None or run_id in woken, "the new run has no queue message"
        busy.set()
        assert await handle.result(timeout=15) == "new"
    assert sf.lines(path) == ["body old", "body new"]


@pytest.fixture
async def procs(engine: Engine, tmp_path: Path) -> Any:
    spawned = Procs(engine.world.url, tmp_path, "tests.runtime.start_proc")
    yield spawned
    await spawned.close()


@pytest.mark.parametrize("then", ["start again", "restart the worker", "wait"])
async def test_a_starter_killed_between_run_created_and_its_message(
    engine: Engine, tmp_path: Path, procs: Procs, then: str
) -> None:
    """The starting process is SIGKILLed after the run's ``run_created`` and before its queue
    message, with a worker running: the run waits (pending) until its id is started again
    (that start answers the run, not a new one), a worker starts and re-arms it, or the
    worker already running finds it on its periodic look (``WAYLINE_START_REARM_SECONDS``:
    before, only the first two moved it); then it runs once, with the first start's input."""
    path, run_id = str(tmp_path / "m"), _id()
    looks = {"WAYLINE_START_REARM_SECONDS": "0.3" if then == "wait" else "0"}
    worker = await procs.worker("worker", env=looks)
    starter = await procs.spawn(
        "start", path, "0", f"{run_id}:first", env={"WAYLINE_TEST_DIE_AFTER_CREATE": "1"}
    )
    assert await asyncio.wait_for(starter.stdout.read(), 30) == b"created\n"
    assert await starter.wait() == -signal.SIGKILL
    if then != "wait":  # (the waiting worker may have re-armed it already)
        info = await engine.world.get_run(run_id)
        assert info is not None and info.status is wayline.RunStatus.PENDING
        woken = await engine.world.runs_with_messages()
        assert woken is None or run_id not in woken
    if then == "start again":
        again = await procs.spawn("start", path, "0", f"{run_id}:second")
        assert await asyncio.wait_for(again.stdout.read(), 30) == f"{run_id} again\n".encode()
        assert await again.wait() == 0
    elif then == "restart the worker":
        await procs.stop(worker)
        await procs.worker("worker")
    handle = engine.client.handle(run_id)
    assert await handle.result(timeout=30) == "first"
    assert sf.lines(path) == ["body first"]


def _rearms(
    monkeypatch: pytest.MonkeyPatch,
    world: Any,
    seen: list[str],
    both: Any,
    sending: list[int] | None = None,
) -> None:
    """Note each periodic re-arm ``world`` sends, counting in ``sending`` those under way;
    with ``both``, hold it until the other world's arrives too (or 15 s passed), so the two
    publish at once."""
    enqueue, under_way = world.enqueue, [0] if sending is None else sending

    async def spied(topic: str, payload: Any, **kwargs: Any) -> Any:
        if payload.get("reason") != "rearm":
            return await enqueue(topic, payload, **kwargs)
        seen.append(payload["runId"])
        under_way[0] += 1
        try:
            if both is not None:
                both.arrived()
                await asyncio.wait_for(both.all.wait(), 15)
            return await enqueue(topic, payload, **kwargs)
        finally:
            under_way[0] -= 1

    monkeypatch.setattr(world, "enqueue", spied)


def _looking(seconds: float) -> Settings:
    """Settings of a worker that looks for lost starts every ``seconds``."""
    return Settings.from_env({"WAYLINE_START_REARM_SECONDS": str(seconds)})


class _Both:
    def __init__(self, n: int) -> None:
        self.n, self.all = n, asyncio.Event()

    def arrived(self) -> None:
        self.n -= 1
        if self.n <= 0:
            self.all.set()


async def test_two_running_workers_rearm_a_lost_start_at_once_each_body_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers run before a start loses its message (the starter's queue write fails
    after its ``run_created``); both find the run on their periodic looks and send its start
    at the same moment: it is stored once (the start's own key), and the run starts once,
    each step body once."""
    path, run_id = str(tmp_path / "m"), _id()
    starter = wayline.Client(await engine.make_world())

    async def died(*args: Any, **kwargs: Any) -> Any:
        raise wayline.WaylineError("the starter died here")

    monkeypatch.setattr(starter.world, "enqueue", died)
    worlds = [await engine.make_world(), await engine.make_world()]
    seen: list[list[str]] = [[], []]
    both, sending = _Both(2), [0]
    for world, mine in zip(worlds, seen, strict=True):
        _rearms(monkeypatch, world, mine, both, sending)
    looks = _looking(0.2)
    async with (
        engine.worker(sf.WORKFLOWS, world=worlds[0], settings=looks),
        engine.worker(sf.WORKFLOWS, world=worlds[1], settings=looks),
    ):
        with pytest.raises(wayline.WaylineError, match="died here"):
            await starter.start_with(
                wayline.StartOptions(run_id=run_id), sf.st_counted, path, "lost"
            )
        assert await engine.client.handle(run_id).result(timeout=30) == "lost"
        await _every_wake_handled(engine.world, [run_id], sending)  # a second one's too
    assert seen[0][:1] == seen[1][:1] == [run_id]
    assert sf.lines(path) == ["body lost"]
    events = await engine.world.list_events(run_id)
    assert len(of_type(events, EventType.RUN_STARTED)) == 1
    assert len(of_type(events, EventType.RUN_COMPLETED)) == 1


async def test_a_slow_start_rearmed_meanwhile_runs_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start whose queue write is held back (a slow client, not a dead one) past a running
    worker's two looks is re-armed; its own message comes after: deduplicated to the stored
    one, or one more wake of a run already started. The body runs once, the run starts once."""
    path, run_id = str(tmp_path / "m"), _id()
    starter = wayline.Client(await engine.make_world())
    enqueue, go_on = starter.world.enqueue, asyncio.Event()

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await go_on.wait()
        return await enqueue(*args, **kwargs)

    monkeypatch.setattr(starter.world, "enqueue", slow)
    worker_world = await engine.make_world()
    seen: list[str] = []
    sending = [0]
    _rearms(monkeypatch, worker_world, seen, None, sending)
    async with engine.worker(sf.WORKFLOWS, world=worker_world, settings=_looking(0.2)):
        starting = asyncio.ensure_future(
            starter.start_with(wayline.StartOptions(run_id=run_id), sf.st_counted, path, "slow")
        )
        await wait_for(lambda: engine.world.get_run(run_id))
        assert await engine.client.handle(run_id).result(timeout=30) == "slow"
        go_on.set()
        handle = await starting
        assert await handle.result(timeout=10) == "slow"
        await _every_wake_handled(engine.world, [run_id], sending)  # the late start's too
    assert seen == [run_id]
    assert sf.lines(path) == ["body slow"]
    events = await engine.world.list_events(run_id)
    assert len(of_type(events, EventType.RUN_STARTED)) == 1
    assert len(of_type(events, EventType.RUN_COMPLETED)) == 1


async def test_a_child_whose_start_was_lost_is_rearmed_by_a_running_worker(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parent creates its child's run and fails before sending the child's start (its
    process died: here the send fails). The parent's redelivery finds the child created and
    sends nothing (it creates only a child that is missing), and startup recovery leaves a
    child to its live parent: the child stayed pending. The running worker's look re-arms it
    with the start's own message; the child starts once and the parent ends."""
    from tests.runtime import flows

    token, parent_id = f"tok-{uuid.uuid4().hex}", _id()
    world = await engine.make_world()
    enqueue, lost = world.enqueue, []

    async def dies_once(topic: str, payload: Any, **kwargs: Any) -> Any:
        if payload.get("reason") == "start" and payload["runId"] != parent_id and not lost:
            lost.append(payload["runId"])
            raise wayline.WorldUnavailableError("the parent's process died here")
        return await enqueue(topic, payload, **kwargs)

    monkeypatch.setattr(world, "enqueue", dies_once)
    kids = [flows.parent_waits, flows.kid_waits]
    async with engine.worker(kids, world=world, settings=_looking(0.2)):
        handle = await engine.client.start_with(
            wayline.StartOptions(run_id=parent_id), flows.parent_waits, token
        )
        await wait_for(lambda: engine.world.get_hook(token), timeout=30)
        await engine.client.resume_hook(token, "done")
        assert await handle.result(timeout=30) == "done"
    [child] = lost
    events = await engine.world.list_events(child)
    assert len(of_type(events, EventType.RUN_STARTED)) == 1


async def test_starts_racing_terminates_of_their_ids(engine: Engine, tmp_path: Path) -> None:
    """Each id is started by one client while another terminates it as soon as it exists,
    two workers serving: every run ends (completed or terminated), each body at most once, and
    a start repeated after the terminate answers the terminated run."""
    path = str(tmp_path / "m")
    other = wayline.Client(await engine.make_world())
    ids = [_id() for _ in range(10)]

    async def terminate(run_id: str) -> bool:
        for _ in range(500):
            try:
                return await other.terminate(run_id)
            except wayline.RunNotFoundError:
                await asyncio.sleep(0.001)
        raise AssertionError(f"run {run_id} never appeared")

    async with (
        engine.worker(sf.WORKFLOWS),
        engine.worker(sf.WORKFLOWS, world=await engine.make_world()),
    ):
        raced = await asyncio.gather(
            *(
                engine.client.start_with(wayline.StartOptions(run_id=i), sf.st_counted, path, i)
                for i in ids
            ),
            *(terminate(i) for i in ids),
        )
        handles = raced[: len(ids)]
        outcomes: dict[str, str] = {}
        for h in handles:
            try:
                outcomes[h.run_id] = await h.result(timeout=20)
            except wayline.RunCancelledError:
                outcomes[h.run_id] = "terminated"
        again = [
            await engine.client.start_with(wayline.StartOptions(run_id=i), sf.st_counted, path, "x")
            for i in ids
        ]
        for h in again:
            try:
                assert await h.result(timeout=20) == outcomes[h.run_id]
            except wayline.RunCancelledError:
                assert outcomes[h.run_id] == "terminated"
    bodies = Counter(sf.lines(path))
    assert all(n == 1 for n in bodies.values()), bodies
    for run_id, outcome in outcomes.items():
        if outcome != "terminated":
            assert outcome == run_id and bodies[f"body {run_id}"] == 1
    for run_id in ids:
        info = await engine.world.get_run(run_id)
        assert info is not None and info.status.terminal


async def test_three_processes_start_shared_and_own_ids_with_two_workers(
    engine: Engine, tmp_path: Path, procs: Procs
) -> None:
    """Three processes start, at one wall-clock instant, 15 ids they share (each with its own
    input) and 15 of their own, served by two worker processes: one run per id, started
    fresh by exactly one process, whose input won; every run ends once, every body once."""
    path = str(tmp_path / "m")
    shared = [_id() for _ in range(15)]
    own = [[_id() for _ in range(15)] for _ in range(3)]
    await procs.worker("worker")
    await procs.worker("worker")
    at = time.time() + 2.0
    starters = [
        await procs.spawn(
            "start",
            path,
            str(at),
            *(f"{i}:{i}-{p}" for pair in zip(shared, own[p], strict=True) for i in pair),
        )
        for p in range(3)
    ]
    outs = await asyncio.wait_for(asyncio.gather(*(s.stdout.read() for s in starters)), 60)
    assert [await s.wait() for s in starters] == [0, 0, 0]
    answers = Counter(line for out in outs for line in out.decode().splitlines())
    for run_id in shared:
        assert answers[f"{run_id} fresh"] == 1 and answers[f"{run_id} again"] == 2, answers
    for run_id in (i for mine in own for i in mine):
        assert answers[f"{run_id} fresh"] == 1, answers
    results = {}
    for run_id in shared + [i for mine in own for i in mine]:
        results[run_id] = await engine.client.handle(run_id).result(timeout=60)
        events = await engine.world.list_events(run_id)
        [created] = of_type(events, EventType.RUN_CREATED)
        assert results[run_id] in str(created.data["input"])
        assert len(of_type(events, EventType.RUN_STARTED)) == 1
        assert len(of_type(events, EventType.RUN_COMPLETED)) == 1
    for p in range(3):
        assert all(results[i] == f"{i}-{p}" for i in own[p])
    assert Counter(sf.lines(path)) == Counter(f"body {r}" for r in results.values())
    assert len(await engine.world.list_runs(limit=1000)) == len(results)


@pytest.mark.parametrize("how", ["cleanup", "archive"])
async def test_an_id_started_again_after_its_run_was_deleted_elsewhere(
    engine: Engine, tmp_path: Path, how: str
) -> None:
    """The client and the worker both remember the ended run; another process deletes (or
    archives) it; the same client starts the id again with another input: a new run, which
    the same worker drives (neither answers from what it remembered), its input winning."""
    path, run_id = str(tmp_path / "m"), _id()
    janitor = await engine.make_world()
    async with engine.worker(sf.WORKFLOWS):
        first = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), sf.st_counted, path, "old"
        )
        assert await first.result(timeout=20) == "old"
        assert (
            await engine.client.start_with(
                wayline.StartOptions(run_id=run_id), sf.st_counted, path, "x"
            )
        )._fresh is False
        if how == "cleanup":
            assert await janitor.delete_runs(older_than=0) == 1
        else:
            assert await janitor.archive_runs(older_than=0) == 1
        again = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), sf.st_counted, path, "new"
        )
        assert again._fresh
        assert await again.result(timeout=20) == "new"
    assert sf.lines(path) == ["body old", "body new"]


async def test_a_recovery_between_a_starts_two_writes_runs_the_body_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers start (and re-arm every live run without a message) while a start sits between
    its ``run_created`` and its queue message: the run gets both the recovery's wake and its
    start, two workers take them at once, and each body runs once."""
    path = str(tmp_path / "m")
    starter = wayline.Client(await engine.make_world())
    created, go_on = asyncio.Event(), asyncio.Event()
    enqueue = starter.world.enqueue

    async def late(*args: Any, **kwargs: Any) -> Any:
        created.set()
        await go_on.wait()
        return await enqueue(*args, **kwargs)

    monkeypatch.setattr(starter.world, "enqueue", late)
    ids = [_id() for _ in range(8)]
    starting = asyncio.gather(
        *(starter.start_with(wayline.StartOptions(run_id=i), sf.st_counted, path, i) for i in ids)
    )
    await asyncio.wait_for(created.wait(), 10)

    async def all_created() -> bool:
        return all([await engine.world.list_events(i) for i in ids])

    await wait_for(all_created)  # every start has its run_created
    rearmed: list[str] = []
    arm = engine.world.enqueue

    async def spied(topic: str, payload: Any, **kwargs: Any) -> Any:
        if payload.get("reason") == "recover":
            rearmed.append(payload["runId"])
        return await arm(topic, payload, **kwargs)

    monkeypatch.setattr(engine.world, "enqueue", spied)
    async with (
        engine.worker(sf.WORKFLOWS),
        engine.worker(sf.WORKFLOWS, world=await engine.make_world()),
    ):
        assert sorted(set(rearmed)) == sorted(ids)  # the first worker re-armed them all
        go_on.set()
        handles = await starting
        assert await asyncio.gather(*(h.result(timeout=20) for h in handles)) == ids
        await _every_wake_handled(engine.world, ids, [0])  # the second wake of each run too
    assert Counter(sf.lines(path)) == Counter(f"body {i}" for i in ids)
    for run_id in ids:
        events = await engine.world.list_events(run_id)
        assert len(of_type(events, EventType.RUN_STARTED)) == 1
        assert len(of_type(events, EventType.RUN_COMPLETED)) == 1
