"""The virtual loop's own shortcuts draw from the seed exactly as what they replace: the ready
queue is shuffled with ``random.Random.shuffle``'s draws and result (the loop inlines it), and
a range of seeds leaves the garbage collector as it found it (it is off while a seed runs)."""

from __future__ import annotations

import gc
import random
from collections import deque

from wayline.sim import batches
from wayline.sim.loop import _shuffle


def test_the_ready_queue_is_shuffled_as_random_shuffle_shuffles_it() -> None:
    for length in range(70):
        for seed in range(4):
            theirs, ours = random.Random(seed), random.Random(seed)
            expected = list(range(length))
            theirs.shuffle(expected)
            ready = deque(range(length))
            _shuffle(ours, ready)
            assert list(ready) == expected, (length, seed)
            assert ours.getrandbits(64) == theirs.getrandbits(64)  # the same draws taken


def test_a_range_of_seeds_leaves_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    batch = batches.run_range(40, 1)
    assert batch.failures == []
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
