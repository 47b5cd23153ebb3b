"""Closing a worker (seed 004): graceful reaches a checkpoint; forced ends the generation and a
replacement in the same process continues from the last checkpoint. Several workers, one world;
several worlds, one process."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline._core.replay import Replay


async def _lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n


async def test_forced_close_then_a_replacement_continues(engine: Engine, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [flows.looping], settings=settings())
    await worker.start()
    handle = await engine.client.start(flows.looping, log, 5, 2, 30.0)
    await wait_for(lambda: _lines(log, 3))  # blocked inside iteration 2
    await worker.close(graceful=False)
    assert not (await handle.status()).terminal
    before = flows.lines(log)
    await asyncio.sleep(0.2)
    assert flows.lines(log) == before  # nothing of the old generation carries on
    async with engine.worker([flows.looping]):
        assert await handle.result(timeout=15) == 0 + 2 + 4
    # iterations 0 and 1 are not re-run; the cut-off iteration 2 runs again (owned recovery)
    assert flows.lines(log) == ["0:1", "1:1", "2:1", "2:2", "3:1", "4:1"]


async def test_graceful_close_hands_the_run_back_at_a_checkpoint(
    engine: Engine, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [flows.looping], settings=settings())
    await worker.start()
    handle = await engine.client.start(flows.looping, log, 4, 1, 0.5)
    await wait_for(lambda: _lines(log, 2))  # iteration 1 is running (0.5 s)
    await worker.close(graceful=True)
    # the running iteration finished and was recorded; nothing after it started
    assert flows.lines(log) == ["0:1", "1:1"]
    assert not (await handle.status()).terminal
    async with engine.worker([flows.looping]):
        assert await handle.result(timeout=15) == 0 + 2
    assert flows.lines(log) == ["0:1", "1:1", "2:1", "3:1"]


async def test_graceful_close_hands_a_long_unwind_back_between_two_reversals(
    engine: Engine, tmp_path: Path
) -> None:
    """A graceful close during a saga unwind waits for the reversal that runs, starts no other
    and hands the run back; a replacement runs the rest, each reversal once (before: the
    closing worker ran the whole unwind within its grace)."""
    from tests.runtime import fencing_flows as ff

    path = str(tmp_path / "m")
    worker = wayline.Worker(engine.world, [ff.long_unwind], settings=settings())
    await worker.start()
    handle = await engine.client.start(ff.long_unwind, path, 4, 0.5)
    await wait_for(lambda: _lines(path, 1))  # the first reversal (of step 3) is running
    await worker.close(graceful=True)
    assert [line.split()[:2] for line in flows.lines(path)] == [["start", "u3"], ["end", "u3"]]
    assert not (await handle.status()).terminal
    async with engine.worker([ff.long_unwind]):
        with pytest.raises(wayline.RunFailedError, match="long_unwind fails"):
            await handle.result(timeout=15)
    done = [line.split()[:2] for line in flows.lines(path)]
    assert done == [[how, f"u{i}"] for i in (3, 2, 1, 0) for how in ("start", "end")]


async def test_a_forced_close_lets_the_running_reversal_end_and_starts_no_other(
    engine: Engine, tmp_path: Path
) -> None:
    """Seed 004: a forced close lets a reversal already started end and record its outcome,
    while no following reversal starts; the replacement runs the rest, each once, and never
    the recorded one again."""
    from tests.runtime import fencing_flows as ff
    from tests.runtime.test_fencing import assert_never_concurrent, bodies

    path = str(tmp_path / "m")
    worker = wayline.Worker(engine.world, [ff.long_unwind], settings=settings())
    await worker.start()
    handle = await engine.client.start(ff.long_unwind, path, 3, 1.0)
    await wait_for(lambda: _lines(path, 1))  # the reversal of step 2 is running
    await worker.close(graceful=False)
    assert [line.split()[:3] for line in flows.lines(path)] == [
        ["start", "u2", "1"],
        ["end", "u2", "1"],
    ]
    assert not (await handle.status()).terminal
    async with engine.worker([ff.long_unwind]):
        with pytest.raises(wayline.RunFailedError, match="long_unwind fails"):
            await handle.result(timeout=20)
    runs = bodies(path)
    assert {k: [how for _, _, how in v] for k, v in runs.items()} == {
        f"u{i}": ["end"] for i in (2, 1, 0)
    }
    assert_never_concurrent(runs)


async def test_two_workers_race_on_the_same_runs(engine: Engine, tmp_path: Path) -> None:
    other_world = await engine.make_world()
    log = str(tmp_path / "log")
    async with engine.worker([flows.crashy]), engine.worker([flows.crashy], world=other_world):
        handles = [await engine.client.start(flows.crashy, log, 0.01) for _ in range(12)]
        for h in handles:
            assert await h.result(timeout=30) == ["before", "finished", "after"]
    marks = flows.lines(log)
    assert marks.count("before") == 12 and marks.count("after") == 12
    assert marks.count("attempt 1") == 12 and "attempt 2" not in marks


async def test_two_workers_on_two_worlds_in_one_process_stay_apart(tmp_path: Path) -> None:
    async with (
        wayline.LocalWorld(tmp_path / "a.db") as a,
        wayline.LocalWorld(tmp_path / "b.db") as b,
    ):
        assert a.single_flight is not b.single_flight
        ca, cb = wayline.Client(a), wayline.Client(b)
        async with wayline.Worker(a, [flows.chain], settings=settings()):
            ha = await ca.start(flows.chain, 3)
            hb = await cb.start(flows.chain, 4)
            assert await ha.result(timeout=10) == 3
            await asyncio.sleep(0.3)
            assert await hb.status() is wayline.RunStatus.PENDING  # a's worker never saw it
        async with wayline.Worker(b, [flows.chain], settings=settings()):
            assert await hb.result(timeout=10) == 6


@wayline.step(name="closing_tests.slow_inline", max_retries=0)
async def slow_inline(path: str, seconds: float) -> str:
    flows.mark(path, "start")
    await asyncio.sleep(seconds)
    flows.mark(path, "end")
    return "done"


@wayline.step(name="closing_tests.slow_queued", max_retries=0, timeout=60)
async def slow_queued(path: str, seconds: float) -> str:
    """``timeout=``: never inline, so it runs under a step message of its own."""
    flows.mark(path, "start")
    await asyncio.sleep(seconds)
    flows.mark(path, "end")
    return "done"


@wayline.step(name="closing_tests.slow_sync", max_retries=0)
def slow_sync(path: str, seconds: float) -> str:
    import time

    flows.mark(path, "start")
    time.sleep(seconds)
    flows.mark(path, "end")
    return "done"


SLOW = {"inline": slow_inline, "step-message": slow_queued, "sync": slow_sync}


@wayline.workflow(name="closing_tests.outlives_the_grace")
async def outlives_the_grace(path: str, seconds: float, kind: str) -> str:
    return await SLOW[kind](path, seconds)


@pytest.mark.parametrize("kind", list(SLOW))
async def test_a_body_cut_off_when_the_shutdown_grace_runs_out_is_warned_about(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """A rolling update whose grace is shorter than a step: the operator is told which run
    (and step) was cut off, not only "worker stopped" (a sync body is waited for instead)."""
    log = str(tmp_path / "log")
    worker = wayline.Worker(
        engine.world, [outlives_the_grace], settings=settings(), shutdown_grace_seconds=0.2
    )
    await worker.start()
    seconds = 1.0 if kind == "sync" else 30.0
    handle = await engine.client.start(outlives_the_grace, log, seconds, kind)
    await wait_for(lambda: _lines(log, 1))  # the body runs
    with caplog.at_level(logging.WARNING, logger="wayline.worker"):
        await worker.close(graceful=True)
    if kind == "sync":  # a thread cannot be cut off: the close waited for it
        assert flows.lines(log) == ["start", "end"]
    else:
        assert flows.lines(log) == ["start"]  # cut off, not waited for
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and handle.run_id in r.getMessage()
    ]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert SLOW[kind].name in warned[0]
    assert ("cannot be cut off" in warned[0]) == (kind == "sync")
    assert "shutdown grace (0.2s) ran out" in warned[0]


async def test_close_ends_when_a_heartbeat_loses_its_cancel(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel that lands just as a world call completes can be lost (``asyncio.wait_for``
    before Python 3.12, which the NATS client uses): seen as a ``wayline worker`` child that
    said "the supervisor is gone: stopping" and then heartbeat for an hour, its ``close``
    waiting for the heartbeat loop. The loops end on the worker's stop flag as well."""
    worker = wayline.Worker(
        engine.world, [flows.chain], settings=settings(), heartbeat_seconds=0.01
    )
    await worker.start()
    record = engine.world.record_served
    in_call = asyncio.Event()

    async def losing_its_cancel(entries: Any) -> None:
        in_call.set()
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            pass  # the call completed as the cancel came: the cancel is gone
        await record(entries)

    monkeypatch.setattr(engine.world, "record_served", losing_its_cancel)
    await asyncio.wait_for(in_call.wait(), 10)
    await asyncio.wait_for(worker.close(), 20)  # it waited for good
    handle = await engine.client.start(flows.chain, 3)  # the world still serves
    async with engine.worker([flows.chain]):
        assert await handle.result(timeout=20) == 3


async def test_a_graceful_close_with_nothing_held_ends_within_its_grace(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The registry withdrawal is a world write (on NATS a read per served route, each up to
    a request timeout). It ran before the grace began, with no bound of its own: a store that
    did not answer kept a close with a 1 s grace, and nothing held, for 10 s."""
    worker = wayline.Worker(
        engine.world, [flows.chain], settings=settings(), shutdown_grace_seconds=1.0
    )
    await worker.start()

    async def unanswered(entries: Any) -> None:
        await asyncio.sleep(10.0)

    monkeypatch.setattr(engine.world, "record_served", unanswered)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await worker.close()
    took = loop.time() - began
    assert took < 6.0, f"a graceful close with a 1 s grace took {took:.1f}s"
    assert "could not withdraw this worker from the registry within" in caplog.text


async def test_a_delivery_received_as_a_forced_close_came_is_handed_back(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receive that loses its cancel (a message came just as the cancel did) returns a
    delivery after the close began; a forced close of an idle worker cancels its consumers
    twice with nothing awaited between, so one lost cancel is all it takes. Its handler was
    spawned after the close had taken stock: left running after ``close`` returned, on a
    world about to close, its delivery held until its visibility ran out. It is handed back
    at once instead, unhandled. (A SQLite world's calls do not suspend: there the handler
    ran to its hand-back before the close went on.)"""
    worker = wayline.Worker(engine.world, [flows.chain], settings=settings())
    await worker.start()
    receive = engine.world.receive
    in_call = asyncio.Event()

    async def losing_its_cancel(topic: str, **kwargs: Any) -> Any:
        if in_call.is_set() or not topic.startswith("flow"):
            return await receive(topic, **kwargs)
        in_call.set()
        try:
            await asyncio.sleep(5.0)
        except asyncio.CancelledError:
            pass  # the call completed as the cancel came: the cancel is gone
        got = await receive(topic, **kwargs)
        await asyncio.sleep(0.1)  # the rest of the receive (a round trip on NATS)
        return got

    monkeypatch.setattr(engine.world, "receive", losing_its_cancel)
    await asyncio.wait_for(in_call.wait(), 10)
    handle = await engine.client.start(flows.chain, 3)
    await asyncio.wait_for(worker.close(graceful=False), 20)
    running = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("wayline-f")]
    assert running == []  # no handler outlives the close
    async with engine.worker([flows.chain]):
        assert await handle.result(timeout=20) == 3


@wayline.step(name="closing_tests.hangs_once", max_retries=1, retry_delay=0.01)
async def hangs_once(path: str) -> str:
    first = not flows.lines(path)
    flows.mark(path, "start")
    if first:
        await asyncio.sleep(60)  # cut off by the forced close
    return "done"


@wayline.workflow(name="closing_tests.hanging")
async def hanging(path: str) -> str:
    return await hangs_once(path)


async def test_a_forced_close_whose_cancel_a_handler_lost_still_cuts_its_body_off(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler whose cancel was lost in a world call (``asyncio.wait_for`` before Python
    3.12, in the NATS client) as a forced close came went on to run its step's body, and the
    close waited for that body to end (a minute here), then let the dead generation record
    it. The close cancels a handler again until it ends: the body is cut off at once, and
    the replacement runs it again."""
    path = str(tmp_path / "log")
    append = engine.world.append
    in_call = asyncio.Event()

    async def losing_its_cancel(run_id: str, events: Any, **kwargs: Any) -> Any:
        starts = any(e.type.value == "step_started" for e in events)
        if in_call.is_set() or not starts:
            return await append(run_id, events, **kwargs)
        in_call.set()
        try:
            await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            pass  # the call completed as the cancel came: the cancel is gone
        return await append(run_id, events, **kwargs)

    monkeypatch.setattr(engine.world, "append", losing_its_cancel)
    worker = wayline.Worker(engine.world, [hanging], settings=settings())
    await worker.start()
    handle = await engine.client.start(hanging, path)
    await asyncio.wait_for(in_call.wait(), 10)
    await asyncio.wait_for(worker.close(graceful=False), 20)
    async with engine.worker([hanging]):
        assert await handle.result(timeout=20) == "done"
    assert flows.lines(path) == ["start", "start"]


@wayline.step(name="closing_tests.loses_a_cancel", max_retries=1, retry_delay=0.01)
async def loses_a_cancel(path: str) -> str:
    first = not flows.lines(path)
    flows.mark(path, "start")
    if first:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            flows.mark(path, "lost")  # the call completed as the cancel came: it is gone
        try:
            await asyncio.sleep(60)  # cut off by the next cancel
        finally:
            flows.mark(path, "ended")
    return "done"


@wayline.workflow(name="closing_tests.losing")
async def losing(path: str) -> str:
    return await loses_a_cancel(path)


async def test_a_forced_close_whose_cancel_a_step_body_lost_cuts_the_body_off_too(
    engine: Engine, tmp_path: Path
) -> None:
    """A body can lose its cancel as a handler can (in a world call). The close cancels the
    handler again; the handler, waiting for its bodies, must pass that cancel on to them, not
    end under a body still running: its delivery would be handed back, and the step run again
    by a replacement, beside the old generation's body."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [losing], settings=settings())
    await worker.start()
    handle = await engine.client.start(losing, path)
    await wait_for(lambda: _lines(path, 1))
    await asyncio.wait_for(worker.close(graceful=False), 20)
    assert flows.lines(path) == ["start", "lost", "ended"]  # no body outlives the close
    async with engine.worker([losing]):
        assert await handle.result(timeout=20) == "done"
    assert flows.lines(path) == ["start", "lost", "ended", "start"]


@wayline.step(name="closing_tests.slow_loser", max_retries=0)
async def slow_loser(path: str) -> str:
    flows.mark(path, "loser")
    await asyncio.sleep(60)  # still running when the run ends; cut off by the forced close
    return "late"


@wayline.step(name="closing_tests.quick_winner", max_retries=0)
async def quick_winner() -> str:
    return "won"


@wayline.step(name="closing_tests.loser_cleanup", max_retries=0)
async def loser_cleanup(path: str) -> None:
    flows.mark(path, "cleanup")


async def _loses(path: str) -> str:
    try:
        return await slow_loser(path)
    finally:
        await loser_cleanup(path)


@wayline.workflow(name="closing_tests.race_then_close")
async def race_then_close(path: str) -> Any:
    return await wayline.race(_loses(path), quick_winner())


async def test_a_forced_close_while_a_race_loser_runs_on_still_closes_the_replay(
    engine: Engine, tmp_path: Path
) -> None:
    """The run ends while a race loser's body runs on inline; the delivery waits for it, and a
    forced close cancels it there. The replay is still closed under itself: left to the
    garbage collector, the loser's ``finally`` ran its step as a plain call, unrecorded."""
    path = str(tmp_path / "log")
    worker = wayline.Worker(engine.world, [race_then_close], settings=settings())
    await worker.start()
    handle = await engine.client.start(race_then_close, path)
    assert await handle.result(timeout=20) == [1, "won"]
    await wait_for(lambda: _lines(path, 1))
    await asyncio.wait_for(worker.close(graceful=False), 20)
    # not closed, it waits for the collector: found alive and open, or collected and the
    # loser's cleanup run as a plain call
    replays = [o for o in gc.get_objects() if isinstance(o, Replay)]
    assert all(r.closed for r in replays if r.run_id == handle.run_id)
    del replays
    gc.collect()
    assert flows.lines(path) == ["loser"]


async def test_a_graceful_close_cancelled_again_ends_as_a_forced_one(
    engine: Engine, tmp_path: Path
) -> None:
    """The task holding ``async with Worker`` is cancelled (a graceful close begins, waiting
    up to 30 s for the running body), then cancelled again by a caller bounding the shutdown
    to half a second: the close ends as a forced one (the body cut off, the run handed back)
    before the cancel goes through, and nothing of the worker runs on after the block was
    left. A replacement continues from the last checkpoint."""
    log = str(tmp_path / "log")
    inside = asyncio.Event()

    async def hold() -> None:
        worker = wayline.Worker(
            engine.world, [flows.looping], settings=settings(), shutdown_grace_seconds=30
        )
        async with worker:
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(hold())
    await asyncio.wait_for(inside.wait(), 10)
    handle = await engine.client.start(flows.looping, log, 4, 1, 30.0)
    await wait_for(lambda: _lines(log, 2))  # iteration 1 is running (30 s)
    task.cancel()
    with pytest.raises((asyncio.CancelledError, TimeoutError)):
        await asyncio.wait_for(task, 0.5)
    assert task.done()
    # The NATS world's runs-index writer is the world's, which this test keeps open past the
    # worker (it stops with the world's close); every other task named wayline is the worker's.
    left = [
        t.get_name()
        for t in asyncio.all_tasks()
        if t.get_name().startswith("wayline") and t.get_name() != "wayline-runs-index-writer"
    ]
    assert not left, left
    before = flows.lines(log)
    await asyncio.sleep(0.3)
    assert flows.lines(log) == before  # nothing of the old worker carries on
    async with engine.worker([flows.looping]):
        assert await handle.result(timeout=15) == 0 + 2
    assert flows.lines(log) == ["0:1", "1:1", "1:2", "2:1", "3:1"]


async def test_a_worker_whose_start_failed_can_start_again(tmp_path: Path) -> None:
    """``start()`` failed (the world could not be opened): a later ``start()`` starts the
    worker for real, where it did nothing (the worker counted itself started)."""
    blocker = tmp_path / "dir"
    blocker.write_text("a file where the world's directory should be")
    world = wayline.LocalWorld(blocker / "wayline.db")
    worker = wayline.Worker(world, [flows.chain], settings=settings())
    with pytest.raises(wayline.WorldUnavailableError):
        await worker.start()
    assert not worker.consuming()
    blocker.unlink()
    await worker.start()
    try:
        assert worker.consuming()
        handle = await wayline.Client(world).start(flows.chain, 3)
        assert await handle.result(timeout=15) == 0 + 1 + 2
    finally:
        await worker.close()
        await world.close()


async def test_a_graceful_close_cancelled_while_a_sync_body_runs_hands_back_the_cut_off_run(
    engine: Engine, tmp_path: Path
) -> None:
    """A sync body and an async body run; the graceful close's grace (0.2 s) runs out, the
    async one is cut off; the close waits for the thread and is cancelled then. It ends as a
    forced one, which hands held deliveries back at once: the cut-off run's too (its handler
    had left the worker's held list, so the forced close did not see it)."""
    a, s = str(tmp_path / "a"), str(tmp_path / "s")
    worker = wayline.Worker(
        engine.world, [outlives_the_grace], settings=settings(), shutdown_grace_seconds=0.2
    )
    await worker.start()
    released: list[Any] = []
    real = engine.world.release

    async def recording(delivery: Any, *args: Any, **kw: Any) -> bool:
        released.append((delivery.payload or {}).get("runId"))
        return await real(delivery, *args, **kw)

    engine.world.release = recording  # type: ignore[method-assign]
    ha = await engine.client.start(outlives_the_grace, a, 30.0, "inline")
    hs = await engine.client.start(outlives_the_grace, s, 1.5, "sync")
    await wait_for(lambda: _lines(a, 1))
    await wait_for(lambda: _lines(s, 1))
    closing = asyncio.ensure_future(worker.close(graceful=True))
    await asyncio.sleep(0.7)  # the grace ran out; the async body is cut off; the thread runs
    assert not closing.done()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert hs.run_id in released, released
    assert ha.run_id in released, released  # the cut-off async run handed back too
