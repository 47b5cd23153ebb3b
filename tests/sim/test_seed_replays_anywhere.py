"""A seed replays the same trace however the process got there: run again after other objects
were made (which moves where the next tasks live), its trace is the same. The end of a seed
cancelled the tasks left over in the order of the set asyncio keeps them in, which is the
order of their addresses, so the lines of the crashed processes' bodies ending came out in an
order no seed decided."""

from __future__ import annotations

import hashlib

from wayline.sim.runner import run_seed


def _hash(seed: int) -> str:
    return hashlib.sha256(run_seed(seed).trace.encode()).hexdigest()


def test_a_seed_run_again_after_other_allocations_gives_the_same_trace() -> None:
    junk: list[list[object]] = []
    for seed in (13, 36, 15, 33, 84):
        first = _hash(seed)
        for size in (1, 777, 5003):
            junk.append([object() for _ in range(size)])
            assert _hash(seed) == first, (seed, size)
