"""Which waits of a run are still pending, folded from its log (for ``Client.wake_up``)."""

from __future__ import annotations

from collections.abc import Iterable

from .events import Event, EventType


def pending_waits(events: Iterable[Event]) -> dict[str, float]:
    """``{correlation id: resumeAt}`` of every wait created and not completed, in log order.
    Plain sleeps are ``wN``; a hook's timeout is ``hN.timeout``, a child's deadline
    ``cN.deadline``."""
    out: dict[str, float] = {}
    for e in events:
        if e.type is EventType.WAIT_CREATED and e.correlation_id:
            at = e.data.get("resumeAt")
            out[e.correlation_id] = float(at) if isinstance(at, int | float) else e.created_at
        elif e.type is EventType.WAIT_COMPLETED and e.correlation_id:
            out.pop(e.correlation_id, None)
    return out


def is_sleep(cid: str) -> bool:
    return "." not in cid
