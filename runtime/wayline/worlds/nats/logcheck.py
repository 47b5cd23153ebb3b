"""Reading a run's log messages back from JetStream, checked.

Any client with publish rights on a run's subject can store bytes there. Every message is
checked before the projection absorbs it (see ``worlds/entries.py``); one that Wayline did not
write raises :class:`CorruptLogError` naming the run and the stream sequence.
"""

from __future__ import annotations

from typing import Any

from ..._core.events import Event, RunStatus
from ...errors import CorruptLogError
from ...world import entries
from .codec import parse_stamp, summary_from
from .direct import StoredMsg


def decode_entry(
    run_id: str, msg: StoredMsg, first_seq: int | None = None
) -> tuple[list[Event], dict[str, Any], float]:
    """One stored message of a run's log, checked (``first_seq``: the dense sequence its
    first event must carry). Anything Wayline did not write raises :class:`CorruptLogError`."""
    try:
        stamp = parse_stamp(msg.headers.get("Nats-Time-Stamp", ""))
    except (ValueError, IndexError, OverflowError):
        raise CorruptLogError(run_id, msg.seq, "no server timestamp") from None
    try:
        body = entries.loads_object(msg.data)
        first = entries.field(body, "s", int)
        if first_seq is not None and first != first_seq:
            raise entries.Unreadable(f"starts at seq {first}, the log is at {first_seq - 1}")
        items = entries.field(body, "e", list)
        if not items:
            raise entries.Unreadable("no events")
        events = []
        for i, e in enumerate(items):
            if not isinstance(e, dict):
                raise entries.Unreadable(f"event {i} is a {type(e).__name__}")
            events.append(
                entries.event(run_id, first + i, e.get("t"), e.get("c"), e.get("d"), stamp)
            )
        summary = body.get("r") or {}
        if not isinstance(summary, dict):
            raise entries.Unreadable("its run summary is not an object")
    except entries.Unreadable as err:
        raise CorruptLogError(run_id, msg.seq, str(err)) from None
    return events, summary, stamp


_SUMMARY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "runId": str,
    "workflow": str,
    "status": str,
    "createdAt": (int, float),
    "lastSeq": int,
}


def checked_summary(run_id: str | None, msg: StoredMsg) -> tuple[dict[str, Any], float]:
    """The run summary a run's last message carries, checked; raises Unreadable."""
    stamp = parse_stamp(msg.headers.get("Nats-Time-Stamp", ""))
    body = entries.loads_object(msg.data)
    raw = body.get("r")
    if not isinstance(raw, dict) or not raw:
        raise entries.Unreadable("no run summary")  # every append carries one
    summary = summary_from(raw, stamp)
    assert summary is not None
    for name, kind in _SUMMARY_FIELDS.items():
        entries.field(summary, name, kind)
    if summary["status"] not in _STORED_STATUSES:
        raise entries.Unreadable(f"unknown run status {str(summary['status'])[:40]!r}")
    if run_id is not None and summary["runId"] != run_id:
        raise entries.Unreadable(f"names run {str(summary['runId'])[:60]!r}")
    for name in ("output", "error", "attributes", "startedAt", "endedAt"):
        summary.setdefault(name, None)
    if summary["error"] is not None and not isinstance(summary["error"], dict):
        raise entries.Unreadable("its error is not an object")
    if summary["attributes"] is not None and not isinstance(summary["attributes"], dict):
        raise entries.Unreadable("its attributes are not an object")
    return summary, stamp


_STORED_STATUSES = frozenset(s.value for s in RunStatus if s is not RunStatus.CORRUPT)


def as_number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
