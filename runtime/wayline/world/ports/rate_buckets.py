"""The rate-bucket port: one token bucket per key, shared by every worker on the world
(``wayline.RateLimit``)."""

from __future__ import annotations


class RateBuckets:
    """Token buckets per key (``_engine.rate_waits``)."""

    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        """Take one token from the bucket of ``key`` (``wayline.RateLimit``) for ``holder``: it
        holds at most ``burst`` tokens, starts full and gains ``per_second`` of them a second,
        by the world's clock, shared by every worker on the world (the arithmetic, with the
        reservations, is ``wayline._core.rate_limits.take``). Returns 0.0 when a token was
        taken, else the seconds until it is due: a ``holder`` that finds none has the next
        free token reserved for it, which it takes when it asks again from that time on."""
        raise NotImplementedError(f"{type(self).__name__} does not keep rate limits")
