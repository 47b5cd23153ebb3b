"""The runtime's wall clock: ``time.time()`` plus an offset that only ``wayline.testing``
moves (its time-skipping environment jumps the offset to the next timer when every run is
idle). Everything that stamps, schedules or compares epoch times in-process reads it here, so
one jump moves the embedded world's stamps, its queue and the engine's due checks together.
Monotonic waits (leases, poll naps) stay on ``time.monotonic()``: they measure real waiting."""

from __future__ import annotations

import time

_offset = 0.0


def now() -> float:
    """Seconds since the epoch, skipped ahead by the test clock (0 outside tests)."""
    return time.time() + _offset


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
