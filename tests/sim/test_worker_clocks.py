"""Each simulated worker reads a clock of its own (``sim/clocks.py``): the store stamps the
world's time, a worker's ``time.time`` is skewed and may step, and its ``World.now`` follows
the store's clock through the offset its appends show, as a NATS worker's does."""

from __future__ import annotations

import contextvars
import random
import time

from wayline._core import clock
from wayline._core.events import EventType, NewEvent
from wayline.sim import run_seed
from wayline.sim.clocks import ClockPlan, Clocks
from wayline.sim.determinism import patched
from wayline.sim.faults import FaultPlan, FaultyWorld
from wayline.sim.loop import PROCESS, VirtualLoop
from wayline.sim.trace import Trace
from wayline.worlds.memory import MemoryStore


def test_a_worker_reads_its_own_clock_while_the_store_stamps_the_worlds() -> None:
    loop = VirtualLoop(random.Random(1))
    clocks = Clocks(loop, ClockPlan(skew=30.0, step_at=1.0, step_by=90.0), random.Random(3))
    store = MemoryStore(now=loop.wall)
    world = FaultyWorld(
        store, FaultPlan(), random.Random(4), Trace(loop.elapsed), "p1", skewed=True
    )
    seen: dict[str, float] = {}

    async def worker() -> None:
        before = world.now()
        seen["skewed"] = time.time() - loop.wall()
        seen["engine"] = clock.now() - time.time()
        out = await world.append(
            "wf_" + "1" * 32, [NewEvent(EventType.RUN_CREATED, data={"workflow": "sim.clocks"})]
        )
        seen["stamp"] = out[0].created_at - loop.wall()
        seen["before"] = before - loop.wall()
        seen["after"] = world.now() - loop.wall()
        clocks.step(1)
        seen["stepped"] = time.time() - loop.wall()

    context = contextvars.copy_context()
    context.run(PROCESS.set, 1)
    offset = clocks.boot(1)
    try:
        with patched(loop, random.Random(2), lambda process: None, clocks.local):
            loop.run_until_complete(loop.create_task(worker(), context=context))
    finally:
        loop.close()
    assert offset != 0.0
    # Sums of floats near 1.8e9 are exact to a microsecond, not to the last bit.
    assert abs(seen["skewed"] - offset) < 1e-6 and seen["engine"] == 0.0
    assert abs(seen["stamp"]) < 0.02, "the store stamped with the worker's clock"
    assert abs(seen["before"] - offset) < 1e-6, "no sample yet: the worker reads its own clock"
    assert abs(seen["after"]) < 0.02, "the append's stamp did not correct the worker's reading"
    assert abs(seen["stepped"] - offset - 90.0) < 1e-6


def test_a_seed_whose_worker_clock_steps_keeps_every_invariant_and_replays() -> None:
    # Seed 10 skews every worker by up to 20 s and steps one of them back by minutes while
    # its runs are in flight (``ClockPlan.draw(10)``).
    plan = ClockPlan.draw(10)
    assert plan.skew > 1.0 and plan.step_at is not None and abs(plan.step_by) > 60.0
    first, second = run_seed(10), run_seed(10)
    assert "clock steps" in first.trace and "settled" in first.trace.split("clock steps")[1]
    assert not first.violations, first.violations
    assert first.trace.encode() == second.trace.encode()
