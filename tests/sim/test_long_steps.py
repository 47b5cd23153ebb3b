"""Long declared steps and renewal outages in the simulator (``wayline.sim.long_steps``): a
step whose body outlives its concurrency lease, three runs contending for its one slot, and a
window in which one worker's renewals are refused, lost or slow. With them the simulator
reaches the slot cut-off race that 1e30346 fixed; seed 39 is the first seed that catches it
when that fix is taken out (docs/simulation.md)."""

from __future__ import annotations

import asyncio
import random

import pytest

from wayline._engine import fencing, step_slots
from wayline.errors import WorldUnavailableError
from wayline.sim import run_seed
from wayline.sim.faults import FaultPlan, FaultyWorld
from wayline.sim.long_steps import HAUL_LEASE, LongPlan, Outage
from wayline.sim.loop import VirtualLoop
from wayline.sim.trace import Trace
from wayline.worlds.memory import MemoryStore

CAUGHT_BY = 39
"""The first seed that catches a slot holder left running past its lease (seeds from 0)."""


def test_a_holder_not_cut_off_when_it_cannot_renew_is_caught_and_replays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As before 1e30346: the slot's timer never cuts the body off, so a holder whose
    renewals hang runs on after its lease, and the next run takes the slot beside it."""

    def never(self: step_slots.Slot, fence: fencing.Fence | None) -> None:
        return None

    monkeypatch.setattr(step_slots.Slot, "_expire", never)
    first, second = run_seed(CAUGHT_BY), run_seed(CAUGHT_BY)
    assert "(outage)" in first.trace
    assert "2 bodies of haul at once, above its max of 1" in first.violations, first.violations
    assert first.trace.encode() == second.trace.encode()


def test_the_same_seed_keeps_one_haul_at_a_time_with_the_cut_off() -> None:
    outcome = run_seed(CAUGHT_BY)
    assert outcome.long_plan.outage is not None and "(outage)" in outcome.trace
    assert outcome.violations == []


def test_a_seed_draws_long_steps_and_every_outage_mode_from_its_own_generator() -> None:
    plans = [LongPlan.draw(seed) for seed in range(200)]
    assert plans == [LongPlan.draw(seed) for seed in range(200)]
    assert any(not p.starts for p in plans) and any(p.starts for p in plans)
    assert all(p.outage is None for p in plans if not p.starts)
    modes = {p.outage.mode for p in plans if p.outage is not None}
    assert modes == {"refused", "lost", "slow"}
    for p in plans:
        if p.outage is not None:
            assert p.outage.process in (1, 2)
            assert HAUL_LEASE / 2 <= p.outage.end - p.outage.start <= HAUL_LEASE * 3


@pytest.mark.parametrize("mode", ["refused", "lost", "slow"])
def test_an_outage_refuses_loses_or_holds_a_slot_renewal(mode: str) -> None:
    """Refused: the lease is not renewed and the call fails. Lost: the lease is renewed and
    the call fails all the same. Slow: the call answers once the window has ended."""
    # 7 s after the take, the slot is free again unless a renewal landed in time
    loop = VirtualLoop(random.Random(1))
    store = MemoryStore(now=loop.wall)
    outage = Outage(1, 0.0, 5.0, mode)  # type: ignore[arg-type]
    world = FaultyWorld(
        store, FaultPlan(), random.Random(2), Trace(loop.elapsed), "p1", outage=outage
    )
    got: list[object] = []

    async def main() -> None:
        won, _ = await world.acquire_slot("k", "h", 1, lease=6.0)
        assert won
        await asyncio.sleep(4.0)
        try:
            got.append(await world.renew_slot("k", "h", lease=6.0))
        except WorldUnavailableError:
            got.append("failed")
        got.append(loop.elapsed())
        await asyncio.sleep(3.0)  # 7 s after the take: only a renewal keeps the slot
        won, _ = await world.acquire_slot("k", "other", 1, lease=6.0)
        got.append(won)

    loop.run_until_complete(main())
    loop.close()
    if mode == "refused":
        assert got[0] == "failed" and got[2] is True  # the lease ran out: another took it
    elif mode == "lost":
        assert got[0] == "failed" and got[2] is False  # renewed although the answer was lost
    else:
        # held until the window ended, then answered: renewed, or lost if it landed after the
        # lease ran out (a renewal keeps only a lease that has not)
        assert isinstance(got[1], float) and got[1] >= 5.0
        assert got[0] in (True, False) and got[2] is (not got[0])
