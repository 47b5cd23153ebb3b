"""How long a world may keep asking again a write that failed as unavailable.

A write that fails for a moment (a JetStream stream electing a new leader answers "no
responders" for about two seconds) is asked again a few times by the world itself. A worker
holding a delivery can afford to wait longer: until just before its delivery could be
redelivered, it is the only one driving the run, and what its write carries (a step's
completion, riding on the run's next append) is lost with the delivery if the write fails.
The worker sets the end of that hold for its handler (:func:`hold_until`), and a world's
retry loop asks :func:`remaining` before each further attempt; outside a held delivery (a
client, the operator) it is 0 and writes fail as they did.

Asking again is safe for a write fenced on the log's last sequence and sent under the same
message id: an earlier attempt that landed makes the retry a duplicate or a refusal the world
resolves by reading its own entry back. The hold bounds only how long the holder keeps
executing, as it bounds everything else it does (``_engine.fencing``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

_until: ContextVar[Callable[[], float] | None] = ContextVar("wayline_patience", default=None)


def hold_until(deadline: Callable[[], float]) -> None:
    """For the calling task and what it spawns: writes may be asked again until
    ``deadline()`` (``time.monotonic`` seconds; read at each attempt, since a renewal moves
    it)."""
    _until.set(deadline)


def remaining() -> float:
    """Seconds left to ask a failed write again; 0 outside a held delivery."""
    deadline = _until.get()
    if deadline is None:
        return 0.0
    return max(0.0, deadline() - time.monotonic())
