"""Rate limits of a memory world: the store's token buckets (``rate_limits``)."""

from __future__ import annotations

from ..._core import rate_limits
from ...world.ports.rate_buckets import RateBuckets
from .store import MemoryStore


class MemoryRateBuckets(RateBuckets):
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        bucket, wait = rate_limits.take(
            self.store.buckets.get(key), self.store.now(), per_second, burst, holder
        )
        if bucket is not None:
            self.store.buckets[key] = bucket
        return wait
