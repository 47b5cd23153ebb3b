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
one slow ack does not move it, and a stepped clock is followed within a window of appends. An
offset below that sample's own uncertainty is taken as none: hosts in sync stay on their own
clock exactly.
"""

from __future__ import annotations

from collections import deque

from ..._core import clock

WINDOW = 16
"""Appends a sample is kept for (a stepped clock is followed after at most this many)."""


class Skew:
    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque(maxlen=WINDOW)  # (round trip, offset)
        self.offset = 0.0
        """Seconds to add to this process's clock to read the server's."""

    def sample(self, sent: float, acked: float, stamp: float) -> None:
        """An append published at ``sent`` and acknowledged at ``acked`` (this process's clock)
        that the server stamped ``stamp``."""
        rtt = acked - sent
        if not rtt >= 0 or stamp != stamp:  # a stepped clock mid-publish, or NaN
            return
        self._samples.append((rtt, stamp - (sent + acked) / 2))
        best_rtt, offset = min(self._samples)
        self.offset = offset if abs(offset) > best_rtt / 2 else 0.0

    def now(self) -> float:
        return clock.now() + self.offset
