"""The status pump (``wayline_operator.pump``): coalescing, spacing, the rate bound, hot before
cold, timers. Its clock is a test clock that moves only when the test says, so every claim is
about counts and order, never about how long something took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from wayline_operator.pump import Pump


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A sync that records each key, and patches (returns True) unless told otherwise."""

    def __init__(self, patches: bool = True) -> None:
        self.calls: list[str] = []
        self.patches = patches
        self.running: set[str] = set()
        self.overlapped = False
        self.gate: asyncio.Event | None = None
        self.fail: set[str] = set()

    async def __call__(self, key: str) -> bool:
        if key in self.running:
            self.overlapped = True
        self.running.add(key)
        try:
            self.calls.append(key)
            if self.gate is not None:
                await self.gate.wait()
            if key in self.fail:
                self.fail.discard(key)
                raise RuntimeError("the API server said no")
            return self.patches
        finally:
            self.running.discard(key)


async def settle() -> None:
    """Let the pump do all it can at this clock reading (no I/O here: only turns of the loop)."""
    for _ in range(1000):
        await asyncio.sleep(0)


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Pump], None]]:
    tasks: list[asyncio.Task[None]] = []

    def start(pump: Pump) -> None:
        tasks.append(asyncio.create_task(pump.run()))

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_touches_before_a_sync_are_coalesced(running: Callable[[Pump], None]) -> None:
    sync = Recorder()
    pump = Pump(sync, clock=Clock())
    for _ in range(100):
        pump.touch("a")
        pump.touch("b")
    running(pump)
    await settle()
    assert sorted(sync.calls) == ["a", "b"]
    assert pump.counts.patched == 2


async def test_a_key_touched_during_its_sync_is_synced_once_more_never_twice_at_once(
    running: Callable[[Pump], None],
) -> None:
    sync = Recorder(patches=False)
    sync.gate = asyncio.Event()
    pump = Pump(sync, clock=Clock())
    pump.touch("a")
    running(pump)
    await settle()
    for _ in range(10):
        pump.touch("a")
    await settle()
    assert sync.calls == ["a"]  # still in its first sync
    sync.gate.set()
    await settle()
    assert sync.calls == ["a", "a"] and not sync.overlapped


async def test_a_patched_key_waits_its_interval(running: Callable[[Pump], None]) -> None:
    clock = Clock()
    sync = Recorder()
    pump = Pump(sync, interval=2.0, clock=clock)
    pump.touch("a")
    running(pump)
    await settle()
    pump.touch("a")
    await settle()
    assert sync.calls == ["a"]  # patched just now: not before its interval is over
    clock.now += 2.0
    pump.touch("other")  # any touch wakes the loop (a real clock would time it out)
    await settle()
    assert sync.calls.count("a") == 2


async def test_a_sync_that_wrote_nothing_is_not_spaced(running: Callable[[Pump], None]) -> None:
    sync = Recorder(patches=False)
    pump = Pump(sync, interval=60.0, clock=Clock())
    running(pump)
    for _ in range(3):
        pump.touch("a")
        await settle()
    assert sync.calls == ["a", "a", "a"]


async def test_patches_per_second_are_bounded(running: Callable[[Pump], None]) -> None:
    clock = Clock()
    sync = Recorder()
    pump = Pump(sync, rate=5.0, clock=clock)
    pump.touch_all([f"k{i}" for i in range(12)], cold=False)
    running(pump)
    await settle()
    assert len(sync.calls) == 5  # the bucket's five tokens, the clock standing still
    clock.now += 1.0
    pump.touch("k0")  # wakes the loop; k0 was patched a second ago (interval 1 s: due)
    await settle()
    assert len(sync.calls) == 10
    clock.now += 1.0
    pump.touch("k0")
    await settle()
    assert sorted(set(sync.calls)) == sorted(f"k{i}" for i in range(12))


async def test_reads_that_write_nothing_give_their_token_back(
    running: Callable[[Pump], None],
) -> None:
    sync = Recorder(patches=False)
    pump = Pump(sync, rate=2.0, clock=Clock())
    pump.touch_all([f"k{i}" for i in range(50)])
    running(pump)
    await settle()
    assert len(sync.calls) == 50 and pump.counts.patched == 0


async def test_hot_keys_go_before_a_resyncs_cold_ones(running: Callable[[Pump], None]) -> None:
    sync = Recorder(patches=False)
    pump = Pump(sync, concurrency=1, clock=Clock())
    pump.touch_all(["c1", "c2", "c3"], cold=True)
    pump.touch("hot")
    pump.touch("c2")  # a change to a key already waiting cold makes it hot
    running(pump)
    await settle()
    assert sync.calls == ["hot", "c2", "c1", "c3"]


async def test_cold_keys_never_take_more_than_their_share_of_the_slots(
    running: Callable[[Pump], None],
) -> None:
    """A sweep of many live runs (cold) while their syncs are slow: at most
    ``cold_concurrency`` of them run at once, and a run that just moved (hot) is synced at
    once, not after the sweep."""
    sync = Recorder(patches=False)
    sync.gate = asyncio.Event()
    pump = Pump(sync, concurrency=8, cold_concurrency=2, clock=Clock())
    pump.touch_all([f"c{i}" for i in range(20)], cold=True)
    running(pump)
    await settle()
    assert sync.calls == ["c0", "c1"]  # two slots of eight: the other six stay free
    pump.touch("hot")
    await settle()
    assert sync.calls == ["c0", "c1", "hot"]
    peak = 0
    recorded = pump._sync

    async def counting(key: str) -> bool:
        nonlocal peak
        sync.running.add(key)
        peak = max(peak, sum(1 for k in sync.running if k.startswith("c")))
        for _ in range(3):  # a slow sync: the others had their chance to start meanwhile
            await asyncio.sleep(0)
        sync.running.discard(key)
        return await recorded(key)

    pump._sync = counting
    sync.gate.set()
    await settle()
    assert sorted(sync.calls) == sorted(["hot", *(f"c{i}" for i in range(20))])
    assert not sync.overlapped
    assert peak <= 2  # never more than the cold share at once, through the whole sweep


def test_the_cold_share_defaults_to_an_eighth_of_the_slots() -> None:
    assert Pump(Recorder(), concurrency=32).cold_concurrency == 4
    assert Pump(Recorder(), concurrency=4).cold_concurrency == 1


async def test_timers_and_retries(running: Callable[[Pump], None]) -> None:
    clock = Clock()
    sync = Recorder(patches=False)
    sync.fail.add("b")
    pump = Pump(sync, retry_delay=5.0, clock=clock)
    pump.touch("a", delay=30.0)
    pump.touch("b")
    running(pump)
    await settle()
    assert sync.calls == ["b"] and pump.counts.failed == 1
    clock.now += 5.0
    pump.touch("x")
    await settle()
    assert sorted(sync.calls) == ["b", "b", "x"]  # b again after its retry delay; a not yet
    clock.now += 25.0
    pump.touch("x")
    await settle()
    assert "a" in sync.calls


async def test_a_cold_key_stays_cold_through_a_failure_and_a_hot_touch_wins(
    running: Callable[[Pump], None],
) -> None:
    """A resync's syncs that failed (the world was down) come back cold after their retry
    delay, behind the runs that moved meanwhile; a key touched hot while its cold sync ran
    is synced again hot."""
    clock = Clock()
    sync = Recorder(patches=False)
    sync.fail.update({"c1", "c2"})
    pump = Pump(sync, concurrency=1, cold_concurrency=1, retry_delay=5.0, clock=clock)
    pump.touch_all(["c1", "c2"], cold=True)
    running(pump)
    await settle()
    assert sync.calls == ["c1", "c2"] and pump.counts.failed == 2
    sync.gate = asyncio.Event()
    pump.touch("busy")  # holds the only slot while the retries fall due
    await settle()
    clock.now += 5.0
    pump.touch("x")  # wakes the loop, which promotes the due retries
    await settle()
    pump.touch("hot")  # a run that moved after them
    sync.gate.set()
    await settle()
    assert sync.calls[2:] == ["busy", "x", "hot", "c1", "c2"]
    assert pump._cold == {} and pump._hot == {}
    sync.gate = None

    sync.calls.clear()
    sync.gate = asyncio.Event()
    pump.touch("c3", cold=True)
    await settle()
    assert sync.calls == ["c3"]
    pump.touch("c3")  # it moved while its cold sync ran
    pump.touch("c4", cold=True)
    sync.gate.set()
    await settle()
    assert sync.calls == ["c3", "c3", "c4"]  # again, hot: before the cold c4


async def test_a_forgotten_key_is_not_synced(running: Callable[[Pump], None]) -> None:
    sync = Recorder()
    pump = Pump(sync, clock=Clock())
    pump.touch("gone")
    pump.touch("kept")
    pump.forget("gone")
    running(pump)
    await settle()
    assert sync.calls == ["kept"]


async def test_a_paused_pump_syncs_nothing_and_keeps_its_touches_for_later(
    running: Callable[[Pump], None],
) -> None:
    sync = Recorder()
    paused = [True]
    pump = Pump(sync, clock=Clock(), paused=lambda: paused[0], pause_poll=0.0)
    running(pump)
    pump.touch("a")
    pump.touch("b", cold=True)
    await settle()
    assert sync.calls == [] and pump.backlog == 2  # kopf peering paused this replica
    paused[0] = False
    await settle()
    assert sync.calls == ["a", "b"]
