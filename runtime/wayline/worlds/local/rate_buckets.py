"""Rate limits of a local world: the ``rate_buckets`` table, a token bucket a key, taken in
one transaction (``_core.rate_limits`` decides)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ..._core import clock, rate_limits
from ...world.ports.rate_buckets import RateBuckets


class LocalRateBuckets(RateBuckets):
    def __init__(self, write: Callable[..., Any]) -> None:
        self._write = write

    async def take_token(
        self, key: str, per_second: float, burst: int, holder: str | None = None
    ) -> float:
        def tx(db: sqlite3.Connection) -> float:
            row = db.execute(
                "SELECT tokens, at, reserved FROM rate_buckets WHERE key = ?", (key,)
            ).fetchone()
            before = None
            if row is not None:
                before = rate_limits.Bucket(float(row[0]), float(row[1]), json.loads(row[2]))
            bucket, wait = rate_limits.take(before, clock.now(), per_second, burst, holder)
            if bucket is not None:
                db.execute(
                    "INSERT OR REPLACE INTO rate_buckets (key, tokens, at, reserved) "
                    "VALUES (?,?,?,?)",
                    (key, bucket.tokens, bucket.at, json.dumps(dict(bucket.reserved))),
                )
            return wait

        wait: float = self._write(tx)
        return wait
