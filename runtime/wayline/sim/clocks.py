"""Each simulated worker process reads a clock of its own: the world's time plus an offset the
seed draws, which may step forward or back by seconds to minutes at a seeded moment (an NTP
step on one host).

The store keeps the one true time (``MemoryStore.now`` is the loop's wall clock): it stamps
the events, and measures delays, leases and tokens, as a server does. A worker's ``time.time``
and ``clock.now`` read its own clock; its ``World.now`` is that clock corrected by the offset
its appends show (:class:`~wayline.worlds.nats.skew.Skew`, as the NATS world does it), so a
stepped clock misleads a worker until its next appends. ``time.monotonic`` is not skewed: an
NTP step does not move a host's monotonic clock.

The plan is drawn from a generator of its own, seeded from the seed's number, so the draws of
the rest of the seed (its faults, crashes, workload) stay what they were without clocks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .loop import PROCESS, VirtualLoop

STEP_WINDOW = (1.0, 30.0)
"""When in a seed (virtual seconds) the step may come: while its runs are in flight (most
seeds settle after 30 to 150 virtual seconds)."""


@dataclass(frozen=True, slots=True)
class ClockPlan:
    skew: float = 0.0
    """Each worker's offset from the world's time is drawn from [-skew, skew] seconds."""
    step_at: float | None = None
    """When one worker's clock steps (virtual seconds into the seed); None: no step."""
    step_by: float = 0.0
    """How far it steps: seconds to minutes, forward (positive) or back."""

    @classmethod
    def draw(cls, seed: int) -> ClockPlan:
        """Hosts in sync now and then (the common case), else a skew of up to a second or up
        to half a minute, and in half the seeds one step."""
        rng = random.Random(f"wayline-sim-clocks-{seed}")
        if rng.random() < 0.3:
            return cls()
        skew = rng.choice((0.0, rng.uniform(0.0, 1.0), rng.uniform(0.0, 30.0)))
        if rng.random() < 0.5:
            return cls(skew=skew)
        sign = rng.choice((-1.0, 1.0))
        return cls(
            skew,
            rng.uniform(*STEP_WINDOW),
            sign * rng.choice((rng.uniform(1.0, 10.0), rng.uniform(10.0, 300.0))),
        )


@dataclass(slots=True)
class Clocks:
    """The clocks of the simulated processes: process 0 (the simulator, the clients) reads the
    world's time; each worker its own."""

    loop: VirtualLoop
    plan: ClockPlan
    rng: random.Random
    offsets: dict[int, float] = field(default_factory=dict)

    def boot(self, process: int) -> float:
        """Give a new process its offset (drawn, or none when the hosts are in sync)."""
        skew = self.plan.skew
        offset = self.rng.uniform(-skew, skew) if skew > 0 else 0.0
        self.offsets[process] = offset
        return offset

    def step(self, process: int) -> None:
        self.offsets[process] = self.offsets.get(process, 0.0) + self.plan.step_by

    def local(self) -> float:
        """The wall clock of the process reading it (``time.time`` in the simulation)."""
        return self.loop.wall() + self.offsets.get(PROCESS.get(), 0.0)
