"""The runtime's wall clock: ``time.time()`` plus an offset that only ``wayline.testing``
moves (its time-skipping environment jumps the offset to the next timer when every run is
idle). Everything that stamps, schedules or compares epoch times in-process reads it here, so
one jump moves the embedded world's stamps, its queue and the engine's due checks together.
Monotonic waits (leases, poll naps) stay on ``time.monotonic()``: they measure real waiting.

The simulator (``wayline.sim``) replaces the source of the time itself (:func:`use`) with its
loop's virtual time, so that a run's stamps are a function of its seed."""

from __future__ import annotations

import time
from collections.abc import Callable

_offset = 0.0
_source: Callable[[], float] = time.time


def now() -> float:
    """Seconds since the epoch, skipped ahead by the test clock (0 outside tests)."""
    return _source() + _offset


def use(source: Callable[[], float] | None) -> None:
    """Read the time from ``source`` (seconds since the epoch) instead of ``time.time``, or
    from ``time.time`` again with None."""
    global _source
    _source = time.time if source is None else source


def offset() -> float:
    return _offset


def advance(seconds: float) -> None:
    """Jump the clock forward (never back: stamps must stay monotonic within a run)."""
    global _offset
    if seconds > 0:
        _offset += seconds


def reset() -> None:
    global _offset
    _offset = 0.0
