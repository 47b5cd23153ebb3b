"""A redelivery handed back because it owns a step its run's pause holds, on the real worlds
(a SQLite file, a nats-server, a NATS world of three partitions): a cancel or a terminate of
the paused run ends it, and the message stops coming back (it is acknowledged, never cycling
forever)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, settings, wait_for
from wayline._engine import handler as handler_module

pytestmark = pytest.mark.partitioned


async def _lines(path: str, n: int) -> bool:
    return len(flows.lines(path)) >= n


async def _no_message_of(engine: Engine, run_id: str) -> bool:
    """No stored message (queued, delayed or in flight) names the run."""
    held = await engine.world.runs_with_messages()
    assert held is not None, "every real world can tell which runs its messages name"
    return run_id not in held


def _count_hand_backs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids of the deliveries handed back as held, in order."""
    hand_back = handler_module.Handler._hand_back_held
    handed: list[str] = []

    async def counting(self: Any, run_id: str, delivery: Any, paused_at: float | None) -> Any:
        handed.append(run_id)
        return await hand_back(self, run_id, delivery, paused_at)

    monkeypatch.setattr(handler_module.Handler, "_hand_back_held", counting)
    return handed


@pytest.mark.parametrize("how", ["cancel", "terminate"])
async def test_a_held_delivery_ends_with_its_run_cancelled_or_terminated_while_paused(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    log = str(tmp_path / f"held-ends-{how}-log")
    client = engine.client
    worker = wayline.Worker(engine.world, [flows.looping], settings=settings())
    await worker.start()
    handle = await client.start(flows.looping, log, 4, 2, 30.0)
    await wait_for(lambda: _lines(log, 3))  # inside "2:1"
    await worker.close(graceful=False)  # the owner dies mid-body
    assert await client.pause(handle.run_id, "paused over a dead owner's step")

    handed = _count_hand_backs(monkeypatch)
    async with engine.worker([flows.looping], settings=settings(max_queue_deliveries=2)):
        await wait_for(lambda: asyncio.sleep(0, handle.run_id in handed), timeout=30)
        assert await getattr(handle, how)(f"{how} while held")
        with pytest.raises((wayline.RunCancelledError, wayline.RunFailedError)):
            await handle.result(timeout=30)
        ended = len(handed)
        # The held message comes back once more (it was handed back for 2 s or more) and is
        # acknowledged then: once the world stores no message of the run, none can be handed
        # back again. A message still cycling stays stored, and this wait fails.
        await wait_for(lambda: _no_message_of(engine, handle.run_id), timeout=30)
        assert len(handed) == ended, handed
    assert (await handle.status()).terminal
    assert flows.lines(log).count("3:1") == 0


@wayline.step(timeout=30.0)
async def held_queued_first(path: str) -> int:
    flows.mark(path, f"q:{wayline.step_context().attempt}")
    return 1


@wayline.step
async def held_inline_second(path: str, seconds: float) -> int:
    attempt = wayline.step_context().attempt
    flows.mark(path, f"i:{attempt}")
    if attempt == 1:
        await asyncio.sleep(seconds)
    return 2


@wayline.workflow
async def held_queued_then_inline(path: str, seconds: float) -> int:
    return await held_queued_first(path) + await held_inline_second(path, seconds)


async def test_a_step_stamped_lazily_under_a_queued_steps_message_runs_soon_after_the_unpause(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queued step's message goes on to drive the run, which stamps the next step with
    that message's id; its owner dies mid-body and the run is paused: the step message's
    redelivery is handed back (not acknowledged), so the step runs soon after the unpause."""
    log = str(tmp_path / "held-queued-log")
    client = engine.client
    worker = wayline.Worker(engine.world, [held_queued_then_inline], settings=settings())
    await worker.start()
    handle = await client.start(held_queued_then_inline, log, 30.0)
    await wait_for(lambda: _lines(log, 2))  # "q:1", then inside "i:1"
    await worker.close(graceful=False)  # the owner dies mid-body
    assert flows.lines(log) == ["q:1", "i:1"]
    assert await client.pause(handle.run_id, "paused over a lazily stamped step")
    handed = _count_hand_backs(monkeypatch)
    async with engine.worker([held_queued_then_inline]):
        # the step message's redelivery has come and was handed back, not run
        await wait_for(lambda: asyncio.sleep(0, handle.run_id in handed), timeout=30)
        assert flows.lines(log) == ["q:1", "i:1"]  # no body runs in the paused run
        assert await client.unpause(handle.run_id)
        assert await handle.result(timeout=20) == 3
    assert flows.lines(log) == ["q:1", "i:1", "i:2"]


@wayline.step
async def held_live_member(path: str, i: int, seconds: float) -> int:
    flows.mark(path, f"m{i}:{wayline.step_context().attempt}")
    await asyncio.sleep(seconds)
    return i


@wayline.workflow
async def held_live_pair(path: str) -> int:
    first, second = await wayline.gather(
        held_live_member(path, 1, 0.05), held_live_member(path, 2, 2.0)
    )
    return first + second + await held_live_member(path, 3, 0.0)


async def test_a_pause_over_a_live_owners_bodies_starts_no_second_body(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause lands while the live owner runs two bodies: they run to their end once,
    the delivery is handed back at most once, and the run ends after the unpause."""
    log = str(tmp_path / "held-live-log")
    handed = _count_hand_backs(monkeypatch)
    async with engine.worker([held_live_pair]):
        handle = await engine.client.start(held_live_pair, log)
        await wait_for(lambda: _lines(log, 2))  # both members are running
        await asyncio.sleep(0.3)  # the first one ended; the second one runs on
        assert await engine.client.pause(handle.run_id, "paused over live bodies")
        # The second body ends about 1.7 s after the pause, and a hand-back then comes back
        # after a quarter of the pause's age (0.4 s, over the tests' 0.2 s held delay): 3.5 s
        # keeps the 1.3 s of margin that 5 s left at the default 2 s held delay.
        await asyncio.sleep(3.5)
        assert sorted(flows.lines(log)) == ["m1:1", "m2:1"]
        assert await engine.client.unpause(handle.run_id)
        assert await handle.result(timeout=20) == 6
    assert sorted(flows.lines(log)) == ["m1:1", "m2:1", "m3:1"]
    assert handed.count(handle.run_id) <= 1, handed
