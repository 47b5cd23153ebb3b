"""The clock port: the world's time, which its events are stamped with."""

from __future__ import annotations

from ..._core import clock


class Clock:
    """A world's notion of now."""

    def now(self) -> float:
        """The world's time (seconds since the epoch), as this process best knows it: what
        a wait's ``resumeAt``, a step's lease and a delayed message are measured against,
        since the events they come from are stamped by the world. The embedded world stamps
        with this process's clock; a world stamped by a server (NATS) corrects this process's
        clock by the offset its own appends showed (``worlds/nats/skew.py``)."""
        return clock.now()
