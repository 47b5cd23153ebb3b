"""The NATS world's projection of runs (``worlds/nats/run_cache.py``): bounded, the most
recently used kept, and a run pushed out comes back empty, to be caught up from the server
(pure bookkeeping, no server)."""

from __future__ import annotations

from wayline.worlds.nats.run_cache import CACHE_RUNS, RunCache


def test_the_cache_keeps_the_most_recently_used_runs() -> None:
    cache = RunCache()
    first = cache.state("r0", "ev.r0")
    first.last_seq = 7  # as if caught up
    for i in range(1, CACHE_RUNS):
        cache.state(f"r{i}", f"ev.r{i}")
    assert cache.state("r0", "ev.r0") is first  # used again: now the newest
    cache.state("new", "ev.new")
    assert len(cache) == CACHE_RUNS
    assert "r1" not in cache and "r0" in cache
    again = cache.state("r1", "ev.r1")
    assert (again.subject, again.last_seq, again.loaded) == ("ev.r1", 0, False)
