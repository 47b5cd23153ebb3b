"""A short sleep is woken in the process that drives its run (``_engine.prompt_wakes``), not
by its delayed message, which nats-server fires no sooner than 250 ms after it is stored; the
delayed message stays armed, so a worker killed in the wait still leaves the run to wake, and
is withdrawn once the wake is written."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, file_exists, of_type, settings, wait_for
from tests.runtime.procs import exec_python
from tests.runtime.prompt_wake_flows import pw_quick, pw_sleepy
from wayline._core.events import EventType, RunStatus
from wayline._engine.handler import Handler
from wayline._engine.messages import Verdict
from wayline.world import Delivery

PROC = [sys.executable, "-m", "tests.runtime.worker_proc"]


def count_drives(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run of each delivery a worker drives (read, replayed and planned) from now on; a
    delivery acknowledged without that is not counted."""
    drives: list[str] = []
    original = Handler._flow

    async def counted(self: Handler, run_id: str, *args: Any, **kwargs: Any) -> Any:
        drives.append(run_id)
        return await original(self, run_id, *args, **kwargs)

    monkeypatch.setattr(Handler, "_flow", counted)
    return drives


async def test_twenty_short_sleeps_are_woken_by_the_delivery_that_drives_the_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of 20 steps, each followed by a 10 ms sleep, is driven by its start's delivery
    alone: each sleep is woken in process, and each sleep's delayed message, when it comes, is
    acknowledged without driving the run again. Each sleep completes once, each step runs
    once. Before, each sleep's delayed message drove the run (21 drives), and on NATS each
    waited at least 250 ms for it."""
    log = str(tmp_path / "bodies")
    drives = count_drives(monkeypatch)
    async with engine.worker([pw_sleepy]) as worker:
        handle = await engine.client.start(pw_sleepy, log, 20, 0.01)
        assert await handle.result(timeout=60) == list(range(20))
        ours = drives.count(handle.run_id)
        assert ours <= 2, drives  # the start's delivery (a redelivery under load: one more)
        assert worker.handler.prompt_wakes.prompt >= 20
    assert flows.lines(log) == [f"tick {i}" for i in range(20)]
    events = await handle.events()
    completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
    assert sorted(completed) == sorted(set(completed)) and len(completed) == 20


async def test_a_wake_left_to_its_delayed_message_past_the_horizon(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sleep due later than ``prompt_wake_seconds`` is left to its delayed message, as
    before: the delivery is acknowledged and the wake drives the run."""
    log = str(tmp_path / "bodies")
    drives = count_drives(monkeypatch)
    async with engine.worker([pw_sleepy], settings=settings(prompt_wake_seconds=0.05)) as w:
        handle = await engine.client.start(pw_sleepy, log, 2, 0.3)
        assert await handle.result(timeout=60) == [0, 1]
        assert w.handler.prompt_wakes.prompt == 0
    assert drives.count(handle.run_id) == 3  # the start, then each sleep's wake


async def test_a_worker_killed_in_a_prompt_wake_leaves_the_run_to_its_delayed_message(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker process waits in process for a run's 1 s sleep (prompt wakes up to 5 s) and
    is SIGKILLed in the wait, after the sleep's delayed message was armed: the next worker
    gets that message and wakes the run. Each step runs once and each sleep completes once."""
    log = str(tmp_path / "bodies")
    handle = await killed_at_mark(engine, tmp_path, log, 1.0)
    assert flows.lines(log) == ["tick 0"]  # killed in the first sleep
    await completes_once(engine, handle, log)


async def killed_at_mark(
    engine: Engine, tmp_path: Path, log: str, seconds: float, kind: str = "prompt-wake"
) -> wayline.RunHandle[Any]:
    """Start ``pw_sleepy`` (2 steps, each then a sleep of ``seconds``) at a worker process
    (``worker_proc`` of ``kind``) and SIGKILL the process once it writes its mark."""
    mark = str(tmp_path / "mark")
    proc = await exec_python(
        [*PROC, kind, engine.world.url, mark], dict(os.environ), tmp_path / "proc.log"
    )
    try:
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert ready.strip() == b"worker ready", ready
        handle = await engine.client.start(pw_sleepy, log, 2, seconds)
        await wait_for(file_exists(mark), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    return handle


async def completes_once(engine: Engine, handle: wayline.RunHandle[Any], log: str) -> None:
    """A worker in this process finishes the run: each step ran once, each sleep completed
    once."""
    async with engine.worker([pw_sleepy]):
        assert await handle.result(timeout=90) == [0, 1]
    assert flows.lines(log) == ["tick 0", "tick 1"]
    events = await handle.events()
    completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
    assert sorted(completed) == sorted(set(completed)) and len(completed) == 2


async def test_a_cancel_asked_while_a_worker_waits_for_a_sleep_ends_the_run_after_it(
    engine: Engine, tmp_path: Path
) -> None:
    """A cancel written while the worker waits in process for a 1 s sleep is read when the
    sleep's completion lands after it, before anything new starts: the run ends cancelled
    and the step after the sleep never runs."""
    log = str(tmp_path / "bodies")
    async with engine.worker([pw_sleepy], settings=settings(prompt_wake_seconds=5.0)) as w:
        handle = await engine.client.start(pw_sleepy, log, 3, 1.0)

        async def waiting() -> bool:
            return bool(w.handler.prompt_wakes.prompt) and flows.lines(log) == ["tick 0"]

        await wait_for(waiting, timeout=30)
        assert await engine.client.cancel(handle.run_id, "stop in the sleep")
        with pytest.raises(wayline.RunCancelledError):
            await handle.result(timeout=30)
    assert flows.lines(log) == ["tick 0"]
    assert (await engine.client.get_run(handle.run_id)).status is RunStatus.CANCELLED


async def test_short_sleeps_in_a_loop_leave_the_only_flow_slot_to_other_runs(
    engine: Engine, tmp_path: Path
) -> None:
    """A run that sleeps 0.1 s after each of 30 steps, on a worker with one flow slot, does
    not keep that slot from another run's start for the whole loop: a delivery waits in
    process for a sleep only in a slot the worker has to spare. Waiting in the only slot,
    the delivery drove the 30 sleeps one after the other (until its hand-off, 400 s by
    default) while the other run's start waited for the slot; with no slot to spare, each
    sleep is left to its delayed message, and the other run starts between two of them."""
    log = str(tmp_path / "bodies")
    async with engine.worker([pw_sleepy, pw_quick], flow_concurrency=1):
        slow = await engine.client.start(pw_sleepy, log, 30, 0.1)

        async def looping() -> bool:
            return len(flows.lines(log)) >= 2

        await wait_for(looping, timeout=30)
        quick = await engine.client.start(pw_quick)
        assert await quick.result(timeout=60) == "quick"
        ticks = len(flows.lines(log))
        assert ticks < 30, f"the other run started only after all {ticks} ticks of the loop"
        assert await engine.client.cancel(slow.run_id, "done with it")


async def test_a_wait_taken_to_wake_here_is_woken_here_though_the_clock_lags_and_slots_run_out(
    engine: Engine, tmp_path: Path
) -> None:
    """Once a worker took a sleep to wake in process, the sleep's delayed message is
    acknowledged unread when it comes, so the worker must not leave the wait afterwards. Here
    the world's clock reads 50 ms behind from the moment the wake is taken (the sleep looks not
    yet due after the worker's own wait) and the worker has no spare slot from then on: the
    delivery still waits the rest and wakes the run. Before, it declined the second wait and
    was acknowledged with the sleep pending, whose delayed message was then taken for a
    duplicate: the run never woke."""
    log = str(tmp_path / "bodies")
    async with engine.worker([pw_sleepy]) as worker:
        handler = worker.handler
        world, wakes = handler.world, handler.prompt_wakes
        real_now, real_woke = world.now, wakes.woke
        lag = [0.0]

        def lagging_now() -> float:
            return real_now() - lag[0]

        def woke(replay: Any, at: float) -> None:
            real_woke(replay, at)
            lag[0] = 0.05
            handler.spare_slot = lambda delivery: False

        world.now = lagging_now  # type: ignore[method-assign]
        wakes.woke = woke  # type: ignore[method-assign]
        handle = await engine.client.start(pw_sleepy, log, 2, 0.01)
        assert await handle.result(timeout=30) == [0, 1]
    events = await handle.events()
    completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
    assert len(completed) == 2 and len(set(completed)) == 2


def count_wait_deliveries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The wait each delivery of a sleep's or a timeout's delayed message (``WaitDue``) names,
    as handed to a worker from now on, whether it drives the run or is acked unread."""
    waits: list[str] = []
    original = Handler.handle_flow

    async def counted(self: Handler, delivery: Delivery) -> Any:
        payload = delivery.payload or {}
        if payload.get("reason") == "wait":
            waits.append(str(payload.get("waitId")))
        return await original(self, delivery)

    monkeypatch.setattr(Handler, "handle_flow", counted)
    return waits


async def test_a_sleep_woken_in_process_withdraws_its_delayed_message(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a sleep woken in process has its completion written, the worker withdraws the
    sleep's delayed message (``cancel_delayed``): of twenty 10 ms sleeps, few delayed messages
    reach a worker (most often none: on NATS one comes only when the scheduler's timer fires
    between its publish and its withdrawal, on SQLite only when a receive claims it as it
    falls due). Before, each of the 20 came, and each was acknowledged unread as a
    duplicate."""
    log = str(tmp_path / "bodies")
    waits = count_wait_deliveries(monkeypatch)
    async with engine.worker([pw_sleepy]) as worker:
        handle = await engine.client.start(pw_sleepy, log, 20, 0.01)
        assert await handle.result(timeout=60) == list(range(20))
        wakes = worker.handler.prompt_wakes
        # what a delayed message not withdrawn would do: come within its 250 ms floor
        await asyncio.sleep(0.6)
        # A schedule may fire before its withdrawal: nats-server fires every due schedule
        # when its timer does, and that timer may be set to fire just after it is stored.
        assert len(waits) <= 10, waits
        assert wakes.prompt >= 20
        assert wakes.retired + len(waits) >= 20, (wakes.retired, waits)
        assert wakes.duplicates == len(waits)
    assert flows.lines(log) == [f"tick {i}" for i in range(20)]
    events = await handle.events()
    completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
    assert sorted(completed) == sorted(set(completed)) and len(completed) == 20


async def test_a_worker_killed_between_a_wake_and_its_withdrawal_leaves_the_run_to_complete(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker process wakes a run's 0.3 s sleep in process, writes the sleep's completion,
    and is SIGKILLed before it withdraws the sleep's delayed message. That message (or, had the
    dead worker taken it for a duplicate, the dead worker's delivery, redelivered) drives the
    run on at the next worker: the run completes, each step runs once, each sleep completes
    once."""
    log = str(tmp_path / "bodies")
    handle = await killed_at_mark(engine, tmp_path, log, 0.3, "prompt-wake-at-cancel")
    assert flows.lines(log) == ["tick 0"]  # killed right after the first sleep's completion
    assert len(of_type(await handle.events(), EventType.WAIT_COMPLETED)) == 1
    await completes_once(engine, handle, log)


async def test_a_wait_handed_back_after_its_wake_in_process_is_woken_by_its_delayed_message(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker takes a run's 0.2 s sleep to wake in process and closes in the wait: after it,
    it hands the run back with the sleep still pending. The worker that gets the run next reads
    the sleep not yet due (its clock 2 s behind) and has no slot to spare, so it leaves the
    wake to the sleep's delayed message and acknowledges its delivery; it then stops. That
    message (or the one re-armed under its key) reaches the first worker, which must drive the
    run with it. Before, the first worker still counted the wait as its own to wake and
    acknowledged the message unread as a duplicate: nothing woke the run."""
    log = str(tmp_path / "bodies")
    async with engine.worker([pw_sleepy]) as first:
        h1 = first.handler

        def close_in_the_wait() -> None:
            h1.closing = True  # a close in the wait, its receives still going

        async with woken_in_process(h1, then=close_in_the_wait):
            handle = await engine.client.start(pw_sleepy, log, 2, 0.2)
        # 2 s behind, not 0.1 s: the second worker reads the run when the first hands it back,
        # after the 0.2 s sleep is due; a read more than the lag after that (a loaded machine)
        # found it due and drove the run itself.
        async with worker_behind_without_a_slot(engine, behind=2.0) as acked:
            await asyncio.wait_for(acked.wait(), 30)
        h1.closing = False  # the first worker takes deliveries again, as a worker still up does
        assert await handle.result(timeout=30) == [0, 1]
    await both_sleeps_completed_once(handle, log)


async def test_a_wait_paused_after_its_wake_in_process_is_woken_by_its_delayed_message(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker takes a run's 1 s sleep to wake in process, and the run is paused in the
    wait: after it, the worker reads the pause, writes nothing and acknowledges its delivery,
    the sleep still pending (its delayed message, come meanwhile, acknowledged unread as a
    duplicate). The unpause's wake reaches a second worker, whose clock reads the sleep not yet
    due (2 s behind) and which has no slot to spare: it re-arms the sleep's delayed message
    under the wait's key and acknowledges its delivery; it then stops. That message reaches
    the first worker, which must drive the run with it. At 4cc7545 the first worker still
    counted the wait as its own to wake (only a hand-back forgot it) and acknowledged the
    message unread as a duplicate: nothing woke the run."""
    log = str(tmp_path / "bodies")
    async with engine.worker([pw_sleepy], settings=settings(prompt_wake_seconds=2.0)) as first:
        h1 = first.handler
        async with woken_in_process(h1):
            handle = await engine.client.start(pw_sleepy, log, 2, 1.0)
        assert await handle.pause()  # in the wait: the wake is held back by the pause
        # the first worker keeps taking the sleep's delayed messages, not the unpause's wake
        bounced = asyncio.Event()
        real_flow1 = h1.handle_flow

        async def bounce(delivery: Delivery) -> Any:
            if (delivery.payload or {}).get("reason") != "wait" and not bounced.is_set():
                await asyncio.sleep(0.05)
                return Verdict("retry", delay=0.05)
            return await real_flow1(delivery)

        h1.handle_flow = bounce  # type: ignore[method-assign]
        await asyncio.sleep(1.5)  # past the sleep, the pause read, the delivery acknowledged
        assert flows.lines(log) == ["tick 0"]
        async with worker_behind_without_a_slot(engine, behind=2.0) as acked:
            assert await handle.unpause()
            await asyncio.wait_for(acked.wait(), 30)
        bounced.set()
        assert await handle.result(timeout=20) == [0, 1]
    await both_sleeps_completed_once(handle, log)


@asynccontextmanager
async def woken_in_process(
    handler: Handler, then: Callable[[], None] = lambda: None
) -> AsyncIterator[None]:
    """Leaves the block once ``handler`` has taken a sleep of the run started in it to wake in
    process (calling ``then`` right after it took it), and stops watching for it."""
    took = asyncio.Event()
    real_woke = handler.prompt_wakes.woke

    def woke(replay: Any, at: float) -> None:
        real_woke(replay, at)
        then()
        took.set()

    handler.prompt_wakes.woke = woke  # type: ignore[method-assign]
    try:
        yield
        await asyncio.wait_for(took.wait(), 30)
    finally:
        handler.prompt_wakes.woke = real_woke  # type: ignore[method-assign]


@asynccontextmanager
async def worker_behind_without_a_slot(
    engine: Engine, behind: float
) -> AsyncIterator[asyncio.Event]:
    """A second worker, on its own world whose clock reads ``behind`` seconds behind, that has
    no slot to spare; the event it yields is set when it acknowledges a flow delivery. It stops
    as the block ends."""
    other = await engine.make_world()
    real_now = other.now
    other.now = lambda: real_now() - behind  # type: ignore[method-assign]
    acked = asyncio.Event()
    async with engine.worker([pw_sleepy], world=other) as second:
        handler = second.handler
        handler.spare_slot = lambda delivery: False
        real_flow = handler.handle_flow

        async def handle_flow(delivery: Delivery) -> Any:
            verdict = await real_flow(delivery)
            if verdict.kind == "ack":
                acked.set()
            return verdict

        handler.handle_flow = handle_flow  # type: ignore[method-assign]
        yield acked


async def both_sleeps_completed_once(handle: wayline.RunHandle[Any], log: str) -> None:
    """Each of the run's two steps ran once and each of its two sleeps completed once."""
    assert flows.lines(log) == ["tick 0", "tick 1"]
    events = await handle.events()
    completed = [e.correlation_id for e in of_type(events, EventType.WAIT_COMPLETED)]
    assert len(completed) == 2 and len(set(completed)) == 2
