"""Checking what a world reads back before anything trusts it.

Anything that can reach the store (a NATS client with publish rights, a process with the
SQLite file open) can write bytes Wayline never wrote. Every reader goes through these checks,
so foreign or damaged bytes become one typed error (:class:`CorruptLogError` for a run's log,
:class:`CorruptEntryError` elsewhere) instead of a ``JSONDecodeError``, ``KeyError`` or
``RecursionError`` deep in a worker, and the decision what to do with it (fence the run, set
the delivery aside, let the rightful claimant overwrite the entry) is taken once, above.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .._core import jsoncodec
from .._core.events import Event, EventType, RunStatus, apply_transition
from .._core.projections import RunInfo, payload
from ..errors import CorruptLogError, WaylineError

_EVENT_TYPES = {t.value: t for t in EventType}
"""A dict lookup: ``EventType(value)`` costs a few microseconds per event of every read."""


class Unreadable(ValueError):
    """Why a stored value is not something Wayline wrote (the message is the reason)."""


def loads(raw: bytes | str) -> Any:
    """``json.loads`` whose every failure is :class:`Unreadable`: bad UTF-8, bad JSON, nesting
    past the interpreter's recursion limit, integers past its digit limit."""
    try:
        return jsoncodec.loads(raw)
    except UnicodeDecodeError as err:
        raise Unreadable(f"not UTF-8 at byte {err.start}") from None
    except json.JSONDecodeError as err:
        raise Unreadable(f"not JSON ({err.msg} at char {err.pos})") from None
    except RecursionError:
        raise Unreadable("JSON nested too deeply") from None
    except ValueError as err:  # e.g. "Exceeds the limit (4300 digits) for integer string"
        raise Unreadable(f"not acceptable JSON ({err})") from None
    except TypeError as err:
        raise Unreadable(f"not a byte string ({err})") from None


def loads_object(raw: bytes | str) -> dict[str, Any]:
    value = loads(raw)
    if not isinstance(value, dict):
        raise Unreadable(f"a JSON {type(value).__name__}, not an object")
    return value


def seconds(value: Any) -> float | None:
    """``value`` as a finite number (a time, a lease), or None: a bool, a string, an integer
    past any float, NaN or infinity, which JSON can all carry."""
    if type(value) is float:  # the common case first: a heartbeat reads one per live worker
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``obj[name]``, which must be of ``kind`` (a bool is not an int here)."""
    if name not in obj:
        raise Unreadable(f"no {name!r}")
    value = obj[name]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise Unreadable(f"{name!r} is a bool")
    if not isinstance(value, kind):
        raise Unreadable(f"{name!r} is a {type(value).__name__}")
    return value


def event_type(value: Any) -> EventType:
    found = _EVENT_TYPES.get(value) if isinstance(value, str) else None
    if found is None:
        raise Unreadable(f"unknown event type {repr(value)[:40]}")
    return found


def event(run_id: str, seq: int, type_: Any, cid: Any, data: Any, created_at: float) -> Event:
    """One event from stored parts, each checked."""
    if cid is not None and not isinstance(cid, str):
        raise Unreadable(f"correlation id is a {type(cid).__name__}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise Unreadable(f"event data is a {type(data).__name__}, not an object")
    ev = Event(run_id, seq, event_type(type_), cid, data, created_at)
    try:  # its fields as every reader takes them (``projections.payload``)
        payload(ev)
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as err:
        raise Unreadable(f"{ev.type} data does not decode: {str(err)[:120]}") from None
    return ev


def check_log(run_id: str, events: list[Event], *, store: str) -> None:
    """Each event must follow from the ones before it (the rules every append obeys): a
    stored entry that breaks them was not written through the world. ``events`` start at 1."""
    status: RunStatus | None = None
    entities: dict[str, str] = {}
    block: Mapping[str, Any] | None = None  # the last run_blocked's data: in force while blocked
    for ev in events:
        cid = ev.correlation_id
        try:
            # apply_transition takes the stored Event as it is: no NewEvent is built per stored
            # event on every read of the log
            status, after = apply_transition(status, entities.get(cid) if cid else None, ev, block)
        except WaylineError as err:
            raise CorruptLogError(
                run_id,
                ev.seq,
                f"does not follow from the entries before it: {err.message}",
                store=store,
            ) from None
        if ev.type is EventType.RUN_BLOCKED:
            block = ev.data
        if cid is not None:
            if after is None:
                entities.pop(cid, None)
            else:
                entities[cid] = after


def check_drop(run_id: str, drop_seq: int, bad: CorruptLogError | None) -> None:
    """Refuse to remove entry ``drop_seq`` unless reading the run's log first fails there
    (``bad``: the error that reading met, or None when the whole log reads)."""
    if bad is not None and bad.seq == drop_seq:
        return
    found = "reads" if bad is None else f"first fails at entry {bad.seq} ({bad.why})"
    raise WaylineError(
        f"run {run_id}: not removing entry {drop_seq}: its log {found}; repair removes only "
        "the entry at which reading the log first fails"
    )


def corrupt_info(run_id: str, err: CorruptLogError, stamp: float = 0.0) -> RunInfo:
    """How a fenced run is shown in lists and statuses."""
    return RunInfo(
        run_id=run_id,
        workflow="",
        status=RunStatus.CORRUPT,
        error={"code": err.code, "message": err.message, "seq": err.seq, "why": err.why},
        created_at=stamp,
        updated_at=stamp,
    )
