"""Runs of many seeds, in this process or in several, each over ranges of seeds of its own
(``python -m wayline.sim --jobs N``)."""

from __future__ import annotations

import gc
import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .runner import run_seed


@dataclass(frozen=True, slots=True)
class Batch:
    """What one process found over its range of seeds."""

    seeds: int
    failures: list[tuple[int, str]]
    """Each failing seed with the first invariant it broke."""
    cpu_seconds: float


def run_range(first: int, count: int) -> Batch:
    """Seeds ``first`` .. ``first + count - 1``, one after the other in this process."""
    began = time.process_time()
    failures = []
    # A seed makes hundreds of thousands of short-lived objects and leaves thousands of tasks
    # in reference cycles. The collector is off while a seed runs and collects once after it,
    # over what the seeds made only: what was alive before the range (the modules, the
    # definitions) is frozen out of its scans. Collecting the young generation every 50,000
    # allocations instead took 8% of the CPU of seeds 0-39 (7 passes, 0.42 s of 5.23 s, each
    # tracing the seed's live objects again), against about 4 ms a seed for one collection
    # after it; a seed's trace does not depend on when garbage is collected
    # (tools/sim_hashes.py compares them).
    enabled, freezing = gc.isenabled(), gc.get_freeze_count() == 0
    gc.collect()
    if freezing:  # (whoever froze objects before the range unfreezes them)
        gc.freeze()
    gc.disable()
    try:
        for seed in range(first, first + count):
            outcome = run_seed(seed)
            if not outcome.ok:
                failures.append((seed, outcome.violations[0]))
            gc.collect()
    finally:
        if freezing:
            gc.unfreeze()
        if enabled:
            gc.enable()
    return Batch(count, failures, time.process_time() - began)


CHUNK = 500
"""Seeds a process takes at a time: small enough that the processes end together and that a
failing seed is printed soon after it ran, large enough that handing out chunks costs nothing."""


def ranges(first: int, count: int, chunk: int | None = None) -> list[tuple[int, int]]:
    """``count`` seeds from ``first`` cut into disjoint ranges of ``chunk`` seeds (the last one
    shorter; :data:`CHUNK` when not given), in order."""
    chunk = CHUNK if chunk is None else chunk
    return [
        (start, min(chunk, first + count - start)) for start in range(first, first + count, chunk)
    ]


def batches(first: int, count: int, jobs: int) -> Iterator[Batch]:
    """Each chunk's batch, in the order of the seeds, as it is done."""
    if jobs <= 1:
        for start, n in ranges(first, count):
            yield run_range(start, n)
        return
    # Spawned, not forked: each process imports the simulator afresh, and inherits the
    # environment (PYTHONHASHSEED, which the order of a set of strings depends on).
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs) as pool:
        yield from pool.imap(run_chunk, ranges(first, count))


def run_chunk(bounds: tuple[int, int]) -> Batch:
    return run_range(*bounds)
