"""``wayline.RateLimit``: how often a step's bodies, or a workflow's runs, may start, per key
(a token bucket shared by every worker on the world).

    @wayline.step(rate_limit=wayline.RateLimit(key=lambda user, text: user, rate="10/s"))
    async def notify(user: str, text: str) -> None: ...

    @wayline.workflow(rate_limit=wayline.RateLimit(rate="1000/h", burst=20))
    async def import_file(path: str) -> None: ...

A bucket holds at most ``burst`` tokens and gains ``rate`` of them a second; a start takes
one. The bucket lives in the world (a table on SQLite, a KV entry per key on NATS changed by
compare-and-set), so the rate holds across every worker and process on the world.

A step that finds no token starts no attempt (no retry is spent, nothing is recorded that a
replay reads): the bucket reserves the next free token for it, and its delivery is handed
back until that token is due; a run that finds none before it starts waits likewise. The run
shows ``blocked`` with ``waitingFor: rate_limit``, the key and the time its token is due,
while it waits.

The arithmetic here is pure (:func:`take`): the worlds keep a :class:`Bucket` per key and
apply it inside their own transaction or compare-and-set.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from . import limit_keys

_PER = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")


def parse_rate(rate: str) -> float:
    """Tokens a second for a rate string: ``"N/s"``, ``"N/m"`` (or ``"N/min"``), ``"N/h"``."""
    if not isinstance(rate, str):
        raise ConfigurationError(
            f"RateLimit.rate takes a string such as '100/s', '30/m' or '1000/h', not {rate!r}"
        )
    match = _RATE.match(rate.lower())
    per = _PER.get(match.group(2)) if match else None
    if match is None or per is None:
        raise ConfigurationError(
            f"RateLimit.rate {rate!r} is not a rate: use 'N/s', 'N/m' (or 'N/min') or 'N/h', "
            "such as '100/s' or '1000/h'"
        )
    count = float(match.group(1))
    if not count > 0 or math.isinf(count):
        raise ConfigurationError(
            f"RateLimit.rate {rate!r} must allow more than 0 starts: use 'N/s', 'N/m' (or "
            "'N/min') or 'N/h' with N > 0"
        )
    return count / per


@dataclass(frozen=True, slots=True)
class RateLimit:
    rate: str
    """How many starts per key: ``"100/s"``, ``"30/m"`` (also ``"30/min"``), ``"1000/h"``."""
    key: Callable[..., Any] | str | None = None
    """A function of the step's (or workflow's) arguments giving the key, a constant string,
    or None: one bucket for the whole step or workflow."""
    burst: int | None = None
    """Starts a full bucket allows at once. By default one second's worth of the rate, at
    least 1: ``"100/s"`` allows 100 at once, ``"1000/h"`` one at a time."""

    def __post_init__(self) -> None:
        parse_rate(self.rate)  # a bad rate is refused where the limit is written
        if self.key is not None and not isinstance(self.key, str) and not callable(self.key):
            raise ConfigurationError(
                f"RateLimit.key takes a function or a string, not {self.key!r}"
            )
        burst = self.burst
        if burst is not None and (
            not isinstance(burst, int) or isinstance(burst, bool) or burst < 1
        ):
            raise ConfigurationError(f"RateLimit.burst must be an int >= 1, not {burst!r}")

    @property
    def per_second(self) -> float:
        return parse_rate(self.rate)

    @property
    def capacity(self) -> int:
        """The bucket's size: ``burst``, or one second's worth of the rate (at least 1)."""
        if self.burst is not None:
            return self.burst
        return max(1, math.floor(self.per_second))

    def key_for(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
        """The bucket key for a call of the workflow or step ``name`` with these arguments."""
        return limit_keys.key_for(self.key, name, args, kwargs)


RESERVATION_SECONDS = 60.0
"""Seconds past its due time a token reserved for a waiter is kept for it. A waiter comes back
when its token is due (its delivery was handed back until then); one that never does (its run
was cancelled or deleted meanwhile) loses the token after this, and the bucket forgets it."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """A key's tokens as of ``at`` (the world's clock, seconds since the epoch), and the tokens
    reserved for waiters (``holder``: when it is due). ``tokens`` is below zero while tokens
    are reserved ahead of the refill: it is what the next refills pay back first."""

    tokens: float
    at: float
    reserved: Mapping[str, float] = field(default_factory=dict)


def take(
    bucket: Bucket | None, now: float, per_second: float, burst: int, holder: str | None = None
) -> tuple[Bucket | None, float]:
    """Take one token at ``now`` for ``holder``: the bucket to store (None: nothing changed)
    and 0.0 when it was taken, or the seconds until it is due.

    A key never seen starts full. A clock behind the bucket's (another worker's, a little
    apart) refills nothing rather than draining it. A holder that finds no token has the next
    free one reserved for it, due when the refill reaches it, so that the waiters on a key
    come back one at a time as their tokens fall due instead of all at every token (a herd,
    of which one wins); coming back at or after that time it takes its reservation. Without a
    ``holder`` nothing is reserved: the answer is when the next token is due."""
    at = now if bucket is None else max(now, bucket.at)
    reserved = {} if bucket is None else dict(bucket.reserved)
    stale = [h for h, due in reserved.items() if due < now - RESERVATION_SECONDS]
    for gone in stale:
        del reserved[gone]
    if bucket is None:
        tokens = float(burst)
    else:
        # A reservation that fell due is a token the bucket holds for its waiter: it counts
        # against the burst, or a waiter that comes back late would take it on top of a
        # bucket refilled to the full burst, and burst + 1 would start at once.
        held = sum(1 for due in reserved.values() if due <= now)
        cap = float(burst - held)
        tokens = min(cap, bucket.tokens + max(0.0, now - bucket.at) * per_second)
    if holder is not None and holder in reserved:
        due = reserved[holder]
        if due > now:
            return (Bucket(tokens, at, reserved) if stale else None), due - now
        del reserved[holder]  # paid for when it was reserved
        return Bucket(tokens, at, reserved), 0.0
    if tokens >= 1.0:
        return Bucket(tokens - 1.0, at, reserved), 0.0
    wait = (1.0 - tokens) / per_second
    if holder is None:
        return (Bucket(tokens, at, reserved) if stale else None), wait
    reserved[holder] = now + wait
    return Bucket(tokens - 1.0, at, reserved), wait
