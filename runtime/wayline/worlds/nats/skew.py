"""The offset between this process's clock and the NATS server's.

Events are stamped by the server (``Nats-Time-Stamp``), and what the engine decides from them
(a wait due, a lease expired) and the message schedules it asks for (``@at``, which the server
fires on its own clock) must be measured on that same clock. A worker whose clock is minutes
ahead of the server's otherwise ends every sleep minutes early and takes a live step owner for
dead once its lease is less than the skew; one minutes behind sees each wake early, re-arms it
for a time the server has already passed, and spins on that wake until its own clock catches
up (measured on a real server: a 3 s sleep took 23 s and 80 wakes 20 s behind; a 3 s sleep
ended at once 20 s ahead).

Every append is a sample: the server stored it between the publish and its ack, so
``stamp - (sent + acked) / 2`` is the offset give or take half the round trip. The sample with
the shortest round trip of the last :data:`WINDOW` is kept (NTP's clock filter, coarsely), so
one slow ack does not move it, and a drifting clock is followed within a window of appends. An
offset below that sample's own uncertainty is taken as none: hosts in sync stay on their own
clock exactly.

A step of this host's wall clock (NTP stepping it, an operator setting it) is corrected at
once, not a window of appends later: each sample keeps the wall clock's distance from the
monotonic clock, which no step moves (NTP slews both alike), and a change of that distance
since the kept sample is a step, taken off the reading. Without it, a worker whose clock
stepped 9 s ahead began a debounced run 4 s before its period ended, on its first append
after the step (found by the simulator, seed 336). The test clock's jumps
(``clock.advance``) are not steps: they move the world's time too.
"""

from __future__ import annotations

import time
from collections import deque

from ..._core import clock

WINDOW = 16
"""Appends a sample is kept for (a drifting clock is followed after at most this many)."""
NOISE = 0.001
"""A change below this (seconds) in the wall clock's distance from the monotonic one is the
rounding of two readings, not a step."""


def _wall_from_monotonic() -> float:
    """This host's wall clock less its monotonic clock: constant but for a step."""
    return clock.now() - clock.offset() - time.monotonic()


class Skew:
    def __init__(self) -> None:
        # (round trip, offset, the wall clock less the monotonic clock at the sample)
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=WINDOW)
        self._offset = 0.0
        self._anchor: float | None = None

    @property
    def offset(self) -> float:
        """Seconds to add to this process's clock to read the server's."""
        if self._anchor is None:
            return self._offset
        stepped = _wall_from_monotonic() - self._anchor
        return self._offset if abs(stepped) < NOISE else self._offset - stepped

    def sample(self, sent: float, acked: float, stamp: float) -> None:
        """An append published at ``sent`` and acknowledged at ``acked`` (this process's clock)
        that the server stamped ``stamp``."""
        rtt = acked - sent
        if not rtt >= 0 or stamp != stamp:  # a stepped clock mid-publish, or NaN
            return
        self._samples.append((rtt, stamp - (sent + acked) / 2, _wall_from_monotonic()))
        best_rtt, offset, self._anchor = min(self._samples)
        self._offset = offset if abs(offset) > best_rtt / 2 else 0.0

    def now(self) -> float:
        return clock.now() + self.offset
