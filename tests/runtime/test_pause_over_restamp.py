"""A pause against a worker's step starts, on the real worlds (a SQLite file, a nats-server, a
NATS world of three partitions): the world refuses a ``step_started`` over a pause, and no
caller of such a start runs a body in a paused run, loops on the refusal or loses the run.

Owned recovery re-stamps the start of a step whose delivery died mid-body with an append not
fenced on the log it read (simulator seed 285): the pause here lands between the recovering
delivery's read of the log and its re-stamp, every time (the re-stamp waits for it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType
from wayline._core.planning import HELD_DELAY_MIN
from wayline._engine import handler as handler_module
from wayline._engine import session as session_module
from wayline._engine.messages import Verdict

pytestmark = pytest.mark.partitioned


async def _lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n


async def _owner_dead_inside_s3(engine: Engine, log: str) -> Any:
    """Start a looping run and kill its worker without grace inside step s3's body."""
    worker = wayline.Worker(engine.world, [flows.looping], settings=settings())
    await worker.start()
    handle = await engine.client.start(flows.looping, log, 4, 2, 30.0)
    await wait_for(lambda: _lines(log, 3))  # "0:1", "1:1", then inside "2:1"
    await worker.close(graceful=False)  # the owner dies mid-body
    assert flows.lines(log) == ["0:1", "1:1", "2:1"]
    return handle


async def _held_over_the_restamp(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Any, list[bool]]:
    """A run whose owner died inside step s3, paused between the recovering delivery's read
    of the log and its re-stamp: the body must not run while the run is paused."""
    log = str(tmp_path / "restamp-log")
    client = engine.client
    handle = await _owner_dead_inside_s3(engine, log)

    restamp = session_module.RunSession._restamp
    paused_first: list[bool] = []

    async def pause_then_restamp(self: Any, rec: Any, attempt: int) -> Any:
        if not paused_first:  # the recovering delivery read the log before this pause
            paused_first.append(await client.pause(handle.run_id, "held over the restamp"))
        return await restamp(self, rec, attempt)

    monkeypatch.setattr(session_module.RunSession, "_restamp", pause_then_restamp)
    return log, handle, paused_first


@asynccontextmanager
async def _recovering(
    engine: Engine, paused_first: list[bool], **overrides: Any
) -> AsyncIterator[None]:
    """A new worker, whose recovering delivery has paused the run before its re-stamp."""
    async with engine.worker([flows.looping], settings=settings(**overrides)):
        await wait_for(lambda: asyncio.sleep(0, bool(paused_first)), timeout=15)
        assert paused_first == [True]
        yield


async def test_a_pause_before_an_owned_recoverys_restamp_holds_the_body(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, handle, paused_first = await _held_over_the_restamp(engine, tmp_path, monkeypatch)
    # The default held delay: the run is still running 0.5 s after the unpause because its
    # held delivery comes back 2 s after its hand-back; the tests' 0.2 s would let it end.
    async with _recovering(engine, paused_first, held_delay_seconds=HELD_DELAY_MIN):
        await asyncio.sleep(1.0)  # a body started over the pause would have marked by now
        assert flows.lines(log) == ["0:1", "1:1", "2:1"]
        assert await handle.status() is wayline.RunStatus.PAUSED
        assert await engine.client.unpause(handle.run_id)
        await asyncio.sleep(0.5)
        assert await handle.status() is wayline.RunStatus.RUNNING
    events = await handle.events()
    paused = of_type(events, EventType.RUN_PAUSED)[0].seq
    unpaused = of_type(events, EventType.RUN_UNPAUSED)[0].seq
    starts = [e.seq for e in of_type(events, EventType.STEP_STARTED)]
    assert not [s for s in starts if paused < s < unpaused]


async def test_a_step_held_over_its_restamp_runs_soon_after_the_unpause(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, handle, paused_first = await _held_over_the_restamp(engine, tmp_path, monkeypatch)
    async with _recovering(engine, paused_first):
        assert await engine.client.unpause(handle.run_id)
        assert await handle.result(timeout=20) == 0 + 2
    lines = flows.lines(log)
    assert lines.count("2:2") == 1 and lines.count("3:1") == 1, lines


async def _paused_before_the_redelivery(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, Any, list[str]]:
    """A run whose owner died inside step s3 and which was paused before any worker read it
    again: the dead owner's redelivery arrives at an already-paused run."""
    log = str(tmp_path / "prepaused-log")
    client = engine.client
    handle = await _owner_dead_inside_s3(engine, log)
    assert await client.pause(handle.run_id, "paused before the redelivery")

    from_read = handler_module.Handler._from_read
    seen: list[str] = []

    async def noting(self: Any, run_id: str, *args: Any, **kwargs: Any) -> Any:
        verdict = await from_read(self, run_id, *args, **kwargs)
        seen.append(run_id)
        return verdict

    monkeypatch.setattr(handler_module.Handler, "_from_read", noting)
    return log, handle, seen


async def test_a_step_whose_redelivery_finds_the_run_paused_runs_soon_after_the_unpause(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, handle, seen = await _paused_before_the_redelivery(engine, tmp_path, monkeypatch)
    async with engine.worker([flows.looping]):
        await wait_for(lambda: asyncio.sleep(0, handle.run_id in seen), timeout=15)
        await asyncio.sleep(0.5)
        assert flows.lines(log) == ["0:1", "1:1", "2:1"]  # no body runs in the paused run
        assert await handle.status() is wayline.RunStatus.PAUSED
        assert await engine.client.unpause(handle.run_id)
        assert await handle.result(timeout=20) == 0 + 2
    lines = flows.lines(log)
    assert lines.count("2:2") == 1 and lines.count("3:1") == 1, lines


async def test_a_delivery_held_through_a_long_pause_spends_no_delivery_and_runs_the_step_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held redelivery is handed back again and again while the pause lasts; a budget of
    two deliveries would fail the run at its third if a hand-back counted."""
    log, handle, _ = await _paused_before_the_redelivery(engine, tmp_path, monkeypatch)
    hand_back = handler_module.Handler._hand_back_held
    handed: list[float | None] = []

    async def counting(self: Any, run_id: str, delivery: Any, paused_at: float | None) -> Any:
        handed.append(paused_at)
        return await hand_back(self, run_id, delivery, paused_at)

    monkeypatch.setattr(handler_module.Handler, "_hand_back_held", counting)
    async with engine.worker([flows.looping], settings=settings(max_queue_deliveries=2)):
        await wait_for(lambda: asyncio.sleep(0, len(handed) >= 3), timeout=30)
        assert flows.lines(log) == ["0:1", "1:1", "2:1"]
        assert await handle.status() is wayline.RunStatus.PAUSED
        assert await engine.client.unpause(handle.run_id)
        assert await handle.result(timeout=45) == 0 + 2
    assert all(at is not None for at in handed)  # the pause's time sets the hand-back's
    lines = flows.lines(log)
    assert lines.count("2:2") == 1 and lines.count("3:1") == 1, lines


async def test_a_worker_hands_a_held_delivery_back_for_its_own_held_delay(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's ``held_delay_seconds`` reaches the planner: a delivery that finds its run
    paused is handed back for at least that long (7.5 s, beyond the default 2 s and a quarter
    of any pause this test makes), and no body runs."""
    log, handle, _ = await _paused_before_the_redelivery(engine, tmp_path, monkeypatch)
    given = handler_module.held_delay
    delays: list[tuple[float, float]] = []

    def noting(
        paused_at: float | None, now: float, least: float = HELD_DELAY_MIN, held_handbacks: int = 0
    ) -> float:
        delay = given(paused_at, now, least, held_handbacks)
        delays.append((least, delay))
        return delay

    monkeypatch.setattr(handler_module, "held_delay", noting)
    async with engine.worker([flows.looping], settings=settings(held_delay_seconds=7.5)):
        await wait_for(lambda: asyncio.sleep(0, bool(delays)), timeout=15)
    assert delays[0][0] == 7.5 and delays[0][1] >= 7.5, delays
    assert flows.lines(log) == ["0:1", "1:1", "2:1"]
    assert await handle.status() is wayline.RunStatus.PAUSED


async def _behind_noting_held_delays(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[float]]:
    """A world whose clock is 60 s behind (a worker on it reads the pause's age as 0), and the
    list every held delay a worker works out is added to."""
    behind = await engine.make_world()
    real_now = behind.now
    monkeypatch.setattr(behind, "now", lambda: real_now() - 60.0)
    given = handler_module.held_delay
    delays: list[float] = []

    def noting(*args: Any) -> float:
        delay = given(*args)
        delays.append(delay)
        return delay

    monkeypatch.setattr(handler_module, "held_delay", noting)
    return behind, delays


async def test_a_held_delivery_s_hand_backs_grow_on_a_worker_whose_clock_is_behind(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose clock is 60 s behind the one that stamped the pause reads the pause's age
    as 0: the delivery's own count of hand-backs still lengthens each hand-back by a quarter
    (``planning.held_delay``), so in 3 s from the first it is handed back at most about 10
    times at the least 0.1 s (it was handed back every 0.1 s, up to 30 times, for as long as
    the pause lasted), and none of them counts as a delivery."""
    log, handle, _ = await _paused_before_the_redelivery(engine, tmp_path, monkeypatch)
    behind, delays = await _behind_noting_held_delays(engine, monkeypatch)
    hand_back = handler_module.Handler._hand_back_held
    handed: list[tuple[float, int]] = []

    async def counting(self: Any, run_id: str, delivery: Any, paused_at: float | None) -> Any:
        handed.append((asyncio.get_running_loop().time(), delivery.attempt))
        return await hand_back(self, run_id, delivery, paused_at)

    monkeypatch.setattr(handler_module.Handler, "_hand_back_held", counting)
    held = settings(held_delay_seconds=0.1)
    async with engine.worker([flows.looping], world=behind, settings=held):
        await wait_for(lambda: asyncio.sleep(0, bool(handed)), timeout=30)
        began = handed[0][0]
        await asyncio.sleep(3.0 - (asyncio.get_running_loop().time() - began))
        within = [a for t, a in handed if t - began < 3.0]
        assert flows.lines(log) == ["0:1", "1:1", "2:1"]
        assert await handle.status() is wayline.RunStatus.PAUSED
    assert len(within) <= 12, (len(within), delays)
    assert delays[:5] == sorted(set(delays[:5])), delays  # each longer than the one before
    assert max(within) == min(within), within  # a hand-back is not a delivery


async def test_hand_backs_for_a_slot_s_wait_do_not_lengthen_a_held_delivery_s_hand_backs(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held delivery is first handed back 20 times as a slot's wait hands a delivery back
    (``world.release`` with no ``held``), then held over the pause. Its held hand-backs start
    from the held delay (0.5 s) and grow by a quarter each, counting only themselves: the 20
    waits made the first one 30 s (0.5 s grown 20 times, capped), so the run resumed up to
    30 s after the unpause. On a worker whose clock is 60 s behind, so that the pause's age
    reads 0 and the delays are exactly the grown held delay; none of it counts as a delivery,
    and the run resumes soon after the unpause, its step once."""
    log, handle, _ = await _paused_before_the_redelivery(engine, tmp_path, monkeypatch)
    behind, delays = await _behind_noting_held_delays(engine, monkeypatch)
    hand_back = handler_module.Handler._hand_back_held
    waits: list[int] = []

    async def slot_waits_first(
        self: Any, run_id: str, delivery: Any, paused_at: float | None
    ) -> Any:
        if len(waits) < 20:  # handed back as step_delivery does for a slot's wait
            waits.append(delivery.attempt)
            assert await self.world.release(delivery, 0.0)
            return Verdict("none")
        return await hand_back(self, run_id, delivery, paused_at)

    monkeypatch.setattr(handler_module.Handler, "_hand_back_held", slot_waits_first)
    held = settings(held_delay_seconds=0.5)
    async with engine.worker([flows.looping], world=behind, settings=held):
        await wait_for(lambda: asyncio.sleep(0, bool(delays)), timeout=30)
        assert len(waits) == 20 and delays[0] == 0.5, (waits, delays)
        await wait_for(lambda: asyncio.sleep(0, len(delays) >= 3), timeout=15)
        assert delays[:3] == pytest.approx([0.5, 0.625, 0.78125]), delays
        assert flows.lines(log) == ["0:1", "1:1", "2:1"]
        assert await handle.status() is wayline.RunStatus.PAUSED
        assert await engine.client.unpause(handle.run_id)
        # the next return is due within about 1 s of the unpause (30 s, grown by the waits)
        assert await handle.result(timeout=10) == 0 + 2
    assert set(waits) == {waits[0]}, waits  # no wait was counted as a delivery
    lines = flows.lines(log)
    assert lines.count("2:2") == 1 and lines.count("3:1") == 1, lines


@wayline.step
async def flapped_step(path: str, i: int) -> int:
    flows.mark(path, f"{i}:{wayline.step_context().attempt}")
    await asyncio.sleep(0.02)
    return i


@wayline.workflow
async def flapped_fifty(path: str) -> int:
    total = 0
    for i in range(50):
        total += await flapped_step(path, i)
    return total


async def test_repeated_pauses_while_a_worker_drives_fifty_steps_run_each_body_once(
    engine: Engine, tmp_path: Path
) -> None:
    log = str(tmp_path / "fifty-log")
    client = engine.client
    flaps = 0
    async with engine.worker([flapped_fifty]):
        handle = await client.start(flapped_fifty, log)
        while flaps < 10 and len(flows.lines(log)) < 45:
            await asyncio.sleep(0.05)
            if await client.pause(handle.run_id, "flapping"):
                flaps += 1
                await asyncio.sleep(0.05)
                assert await client.unpause(handle.run_id)
        assert await handle.result(timeout=60) == sum(range(50))
    assert flaps >= 3
    lines = flows.lines(log)
    assert sorted(lines) == sorted(f"{i}:1" for i in range(50)), lines
