"""Long declared steps and the renewal faults that reach them.

A step declared with a short concurrency lease (``sim.haul``: ``Limit(max=1, lease="6s")``)
whose body runs up to two and a half leases, so that its worker must renew the slot (every
third of the lease) while it runs, and three runs that contend for its one slot. Beside it, an
outage of one worker process's renewals, of slots and of deliveries alike, for a few seconds
to a few leases: each renewal in the window is refused (the store did not answer), lost (the
store renewed, the answer never came) or slow (it hangs until the window ends, then lands).
A holder that cannot renew must cut its body off before another worker can take the slot
(``_engine/step_slots.Slot``, fixed by 1e30346); the probe counts the bodies of ``haul`` at
once against its ``max``.

The plan comes from a generator of its own, seeded from the seed's number, and a seed that
draws no long steps starts nothing more: its history is what it was without them.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Literal

from .. import Limit, step, workflow
from ..client import Client
from .trace import Trace
from .workload import Stage

HAUL_MAX = 1
HAUL_LEASE = 6.0
"""Seconds of the slot's lease: renewed every 2 s, cut off 5 s after the last proven send."""
LONG_ODDS = 0.2
"""How likely a seed runs the long steps. A seed with them costs 1.9-2.4 times the CPU it
took without them (docs/simulation.md, "Limits"), so in one seed in five they cost 9-22% of
the seeds a minute; one in five keeps every seed named in docs/simulation.md."""
OUTAGE_ODDS = 0.7
"""How likely a seed with long steps has a renewal outage."""

Mode = Literal["refused", "lost", "slow"]


@step(
    name="sim.haul",
    max_retries=5,
    retry_delay="1s",
    concurrency=Limit(key=lambda load: "bay", max=HAUL_MAX, lease=f"{HAUL_LEASE:g}s"),
)
async def haul(load: str) -> str:
    probe = Stage.probe
    assert probe is not None, "a simulated body runs inside a seed"
    async with probe.body("haul"):
        # Longer than the lease, most of the time: the slot lives on its renewals.
        await asyncio.sleep(Stage.rng.uniform(HAUL_LEASE / 3, HAUL_LEASE * 2.5))
    return f"hauled-{load}"


@workflow(name="sim.hauler")
async def hauler(load: str) -> str:
    return await haul(load)


@dataclass(frozen=True, slots=True)
class Outage:
    """A window of virtual seconds in which every renewal of one worker process fails."""

    process: int
    start: float
    end: float
    mode: Mode

    def covers(self, elapsed: float) -> bool:
        return self.start <= elapsed < self.end


@dataclass(frozen=True, slots=True)
class LongPlan:
    starts: tuple[float, ...] = ()
    """When each run of ``sim.hauler`` starts (virtual seconds); none: no long steps."""
    outage: Outage | None = None

    @classmethod
    def draw(cls, seed: int) -> LongPlan:
        rng = random.Random(f"wayline-sim-long-{seed}")
        if rng.random() >= LONG_ODDS:
            return cls()
        starts = tuple(rng.uniform(0.0, 20.0) for _ in range(3))
        if rng.random() >= OUTAGE_ODDS:
            return cls(starts)
        mode: Mode = rng.choice(("refused", "lost", "slow"))
        start = rng.uniform(0.0, 40.0)
        length = rng.uniform(HAUL_LEASE / 2, HAUL_LEASE * 3)
        return cls(starts, Outage(rng.choice((1, 2)), start, start + length, mode))

    def for_process(self, process: int) -> Outage | None:
        return self.outage if self.outage and self.outage.process == process else None


async def drive(client: Client, plan: LongPlan, trace: Trace) -> None:
    """Start the long steps' runs at their times (the seed waits for every run to end)."""

    async def one(after: float, load: str) -> None:
        await asyncio.sleep(after)
        handle = await client.start(hauler, load)
        trace.note(f"client started hauler {load} as {handle.run_id[-6:]}")

    await asyncio.gather(*(one(after, f"h{i}") for i, after in enumerate(plan.starts)))
