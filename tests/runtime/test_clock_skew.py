"""A worker whose clock is off the world's. Events are stamped by the world (by the NATS
server on NATS), and a worker decides from them with its own clock: when a wait is due, when
a step owner's lease ran out, when a delayed message should fire. The whole process is skewed
here (the runtime's clock module, and the NATS queue's own reading of the time, as a host
whose clock is off would have them); the server is real."""

from __future__ import annotations

import time
import types
from typing import Any

import pytest

from tests.runtime import flows
from tests.runtime.harness import Engine, of_type
from wayline._core import clock
from wayline._core.events import EventType

SKEW = 10.0


def skew_this_process(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    monkeypatch.setattr(clock, "_offset", seconds)
    import wayline.worlds.nats.queue as queue_module

    skewed = types.SimpleNamespace(time=lambda: time.time() + seconds, monotonic=time.monotonic)
    monkeypatch.setattr(queue_module, "time", skewed)


def count_sends(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    keys: list[str] = []
    real = engine.world.enqueue

    async def enqueue(topic: str, payload: Any, **kw: Any) -> Any:
        keys.append(str(kw.get("idempotency_key")))
        return await real(topic, payload, **kw)

    monkeypatch.setattr(engine.world, "enqueue", enqueue)
    return keys


async def test_a_worker_ahead_of_the_world_sleeps_the_whole_sleep(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock 10 s ahead of the server's saw a 2 s sleep due at once and ended it at once."""
    skew_this_process(monkeypatch, SKEW)
    async with engine.worker([flows.sleeper]):
        handle = await engine.client.start(flows.sleeper, 2.0)
        assert await handle.result(timeout=30) >= 2.0
    events = await handle.events()
    (created,) = of_type(events, EventType.WAIT_CREATED)
    (woken,) = of_type(events, EventType.WAIT_COMPLETED)
    assert woken.created_at >= created.data["resumeAt"]  # by the world's own stamps


async def test_a_worker_behind_the_world_does_not_spin_on_its_wake(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock 10 s behind the server's saw each wake early and re-armed it for a time the
    server had already passed: ~40 wakes a 1 s sleep, until its own clock caught up."""
    skew_this_process(monkeypatch, -SKEW)
    keys = count_sends(engine, monkeypatch)
    async with engine.worker([flows.sleeper]):
        handle = await engine.client.start(flows.sleeper, 1.0)
        assert await handle.result(timeout=60) >= 1.0
    rearmed = [k for k in keys if ":after:" in k]
    assert len(rearmed) <= 2, keys


def test_the_offset_is_the_best_sample_and_none_within_its_uncertainty() -> None:
    from wayline.worlds.nats.skew import Skew

    skew = Skew()
    skew.sample(100.0, 100.2, 130.1)  # 30 s ahead, give or take 0.1
    assert skew.offset == pytest.approx(30.0)
    skew.sample(101.0, 101.02, 131.0)  # a shorter round trip wins
    assert skew.offset == pytest.approx(29.99)
    skew.sample(102.0, 104.0, 140.0)  # a slow ack does not move it
    assert skew.offset == pytest.approx(29.99)
    in_sync = Skew()
    in_sync.sample(100.0, 100.01, 100.009)  # within half the round trip: no correction
    assert in_sync.offset == 0.0
    in_sync.sample(100.0, 99.0, 100.0)  # the clock stepped back mid-publish: no sample
    in_sync.sample(100.0, 100.01, float("nan"))
    assert in_sync.offset == 0.0
