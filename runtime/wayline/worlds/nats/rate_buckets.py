"""Rate limits on JetStream: a KV entry per key in the ``<prefix>_rates`` bucket, ``{"tokens":
float, "at": seconds, "reserved": {holder: due}}`` (``wayline.RateLimit``), changed only by
compare-and-set (create when absent, update on the revision read), so of two workers racing
for the last token only one takes it and the other reads the bucket again. A take that finds
no token reserves the next one for its holder (a write); one whose reservation is not due yet
writes nothing.

The time is the server's as this process knows it (``skew.py``), so workers whose clocks are
apart refill the bucket alike. Anyone with publish rights can write into the bucket: a value
that is not a bucket counts as a full one, and the next take replaces it."""

from __future__ import annotations

import json
from typing import Any

from ..._core import rate_limits
from ...errors import WorldUnavailableError
from ...world import entries
from .buckets import BucketOnFirstUse
from .codec import wrap
from .direct import kv_read, kv_value
from .names import kv_key

_ATTEMPTS = 50
"""Compare-and-set rounds a take tries before it reports the key contended: each lost round
means another worker took a token meanwhile, so at 3 workers a take rarely needs more than a
few."""


class RateBuckets(BucketOnFirstUse):
    suffix = "rates"

    async def take(self, key: str, per_second: float, burst: int, holder: str | None) -> float:
        import nats.js.errors

        kv = await self._bucket()
        name = kv_key(key)
        for _ in range(_ATTEMPTS):
            found = await kv_read(
                self._js, kv._name, name, url=self._url, what=f"reading rate limit {key!r}"
            )
            revision, value_read = kv_value(found)
            before = _read(value_read)
            bucket, wait = rate_limits.take(before, self._now(), per_second, burst, holder)
            if bucket is None:
                return wait
            stored: dict[str, Any] = {"key": key, "tokens": bucket.tokens, "at": bucket.at}
            if bucket.reserved:
                stored["reserved"] = dict(bucket.reserved)
            value = json.dumps(stored).encode()
            try:
                await kv.update(name, value, last=revision)  # 0: over no entry
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                continue  # another worker took a token first: look again
            except Exception as err:
                raise wrap(self._url, f"taking a token of rate limit {key!r}", err) from err
            return wait
        raise WorldUnavailableError(f"NATS at {self._url}: rate limit {key!r} is contended")


def _read(value: bytes | None) -> rate_limits.Bucket | None:
    """A stored bucket, or None (a full one) for a missing or unreadable entry."""
    try:
        stored = entries.loads(value) if value else None
    except entries.Unreadable:
        return None
    if not isinstance(stored, dict):
        return None
    tokens, at = entries.seconds(stored.get("tokens")), entries.seconds(stored.get("at"))
    if tokens is None or at is None:
        return None
    listed = stored.get("reserved")
    reserved: dict[str, float] = {}
    for holder, due in listed.items() if isinstance(listed, dict) else ():
        when = entries.seconds(due)
        if isinstance(holder, str) and when is not None:
            reserved[holder] = when
    return rate_limits.Bucket(tokens, at, reserved)
