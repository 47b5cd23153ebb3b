"""The order in which a world serves ready work: priority with aging, then fairness.

A run's ``StartOptions(priority=, fairness_key=, fairness_weight=)`` are recorded in its
``run_created`` and stamped on every queue message sent on its behalf (:func:`stamp`): the
client's start, and every message a worker sends while it handles one of the run's deliveries
(:func:`attached`, as :mod:`wayline.telemetry` carries a trace), so its steps, its wakes and its
children's starts carry them too.

Among the ready messages of one topic, a world serves (the NATS world with the differences
docs/nats.md lists: rule 2 between a level's lanes, each holding the keys its hash picks):

1. the most urgent *level* first: a message's level is its priority, and a level counts as
   one level more urgent (towards 0) for each :data:`AGING_SECONDS` its longest-waiting ready
   message has waited, so work that waited ``(p - q) * AGING_SECONDS`` at priority ``p`` is
   served before work of priority ``q`` that became ready after it: no priority starves. The
   aging moves whole levels, never messages within one, so it cannot undo rule 2 among work
   of one priority however deep the backlog;
2. within a level, the lowest *fair tag* first (start-time fair queuing). Each fairness key
   has a virtual clock per topic: a message's tag is ``max(topic clock, the key's last
   finish)``, and its key's finish becomes ``tag + 1 / weight``; the topic clock follows the
   tag of the work served. So the keys with ready work take turns, a key of weight 3 three
   times as often as one of weight 1, and a key whose backlog is 10,000 deep delays a new
   key's work by at most one message per other key per turn. Messages without a key share
   the key ``""``: among them the order is the order they were sent in;
3. then the oldest message.

The order holds per topic (the flow topic and the step topic are received separately by a
worker, each on its own slots), and it is the order of *receipt*: a message handed back or
retried keeps its tag, and waits again from when it is due.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 5
"""Priorities are 0 (served first) to 9; a run started without one has 5, so work can be put
both ahead of and behind the default without touching it."""

MAX_WEIGHT = 100
"""A fairness weight is 1 to 100 turns per round: a larger ratio is a priority, not a share."""

AGING_SECONDS = 60.0
"""How long a ready message waits at one level before it goes up one: a priority-9 message
reaches level 0 within nine minutes of waiting, whatever arrives meanwhile. Long enough that
priorities order a busy queue, short enough that nothing waits for hours behind a flood."""

PRIORITY_FIELD = "_priority"
FAIRNESS_KEY_FIELD = "_fairnessKey"
FAIRNESS_WEIGHT_FIELD = "_fairnessWeight"
"""The payload fields that carry a message's ordering (absent: the defaults)."""

MAX_FAIRNESS_KEY_CHARS = 256


@dataclass(frozen=True, slots=True)
class Ordering:
    """How a run's work is ordered: its priority, fairness key and the key's weight."""

    priority: int = DEFAULT_PRIORITY
    fairness_key: str = ""
    fairness_weight: int = 1

    def fields(self) -> dict[str, Any]:
        """The payload fields that carry this ordering (none for the defaults)."""
        out: dict[str, Any] = {}
        if self.priority != DEFAULT_PRIORITY:
            out[PRIORITY_FIELD] = self.priority
        if self.fairness_key:
            out[FAIRNESS_KEY_FIELD] = self.fairness_key
        if self.fairness_weight != 1:
            out[FAIRNESS_WEIGHT_FIELD] = self.fairness_weight
        return out


DEFAULT = Ordering()

# Said by ``StartOptions`` and by ``wayline start`` (with their own spellings of the names).
WEIGHT_WITHOUT_KEY = "{weight} weighs a {key}: give one too"


def check(priority: object, fairness_key: object, fairness_weight: object) -> None:
    """Refuse a priority, fairness key or weight no run can have, saying why."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority is an integer, not {priority!r}")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(
            f"priority is {MIN_PRIORITY} (served first) to {MAX_PRIORITY}, not {priority}"
        )
    if fairness_key is not None:
        if not isinstance(fairness_key, str) or not fairness_key:
            raise ValueError(f"fairness_key is a non-empty string, not {fairness_key!r}")
        try:  # its lane is a hash of its UTF-8 bytes (a lone surrogate has none)
            fairness_key.encode()
        except UnicodeEncodeError as err:
            raise ValueError(
                f"fairness_key is text that encodes as UTF-8, not {fairness_key!r} ({err.reason} "
                f"at character {err.start})"
            ) from None
        if len(fairness_key) > MAX_FAIRNESS_KEY_CHARS:
            raise ValueError(
                f"fairness_key has at most {MAX_FAIRNESS_KEY_CHARS} characters, "
                f"not {len(fairness_key)}"
            )
    if isinstance(fairness_weight, bool) or not isinstance(fairness_weight, int):
        raise ValueError(f"fairness_weight is an integer, not {fairness_weight!r}")
    if not 1 <= fairness_weight <= MAX_WEIGHT:
        raise ValueError(f"fairness_weight is 1 to {MAX_WEIGHT}, not {fairness_weight}")


def record_fields(order: Ordering) -> dict[str, Any]:
    """The ``run_created`` fields that record ``order`` (none for the defaults)."""
    out: dict[str, Any] = {}
    if order.priority != DEFAULT_PRIORITY:
        out["priority"] = order.priority
    if order.fairness_key:
        out["fairnessKey"] = order.fairness_key
        if order.fairness_weight != 1:
            out["fairnessWeight"] = order.fairness_weight
    return out


def of_record(data: Mapping[str, Any]) -> Ordering:
    """The ordering a ``run_created`` records (``priority``, ``fairnessKey``,
    ``fairnessWeight``); the defaults for what it lacks or a value it cannot hold."""
    return _parse(data.get("priority"), data.get("fairnessKey"), data.get("fairnessWeight"))


def of_payload(payload: Mapping[str, Any] | None) -> Ordering:
    """The ordering a message's payload carries; the defaults for a field it lacks or a value
    no run can have (a message sent by an older release, or written by hand)."""
    if not isinstance(payload, Mapping):
        return DEFAULT
    return _parse(
        payload.get(PRIORITY_FIELD),
        payload.get(FAIRNESS_KEY_FIELD),
        payload.get(FAIRNESS_WEIGHT_FIELD),
    )


def _parse(priority: Any, key: Any, weight: Any) -> Ordering:
    priority = DEFAULT_PRIORITY if priority is None else priority
    weight = 1 if weight is None else weight
    try:
        check(priority, key, weight)
    except ValueError:
        return DEFAULT
    return Ordering(priority, key or "", weight)


_CURRENT: contextvars.ContextVar[Ordering | None] = contextvars.ContextVar(
    "wayline_ordering", default=None
)


@contextlib.contextmanager
def attached(ordering: Ordering) -> Iterator[None]:
    """Stamp ``ordering`` on every message sent in this context that carries none."""
    token = _CURRENT.set(ordering)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def follow(ordering: Ordering) -> None:
    """From here on in this context, stamp the ordering the run recorded (its ``run_created``)
    rather than the delivery's: a wake sent from outside a run (a hook resumed by a client, an
    unpause, a redrive, a recovery sweep) carries none, and the run's later messages would
    otherwise take the defaults from it. Undone with the ``attached`` block around it."""
    _CURRENT.set(ordering)


def stamp(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` with the current context's ordering, unless it carries one already."""
    out = dict(payload)
    current = _CURRENT.get()
    if current is not None and not any(
        f in out for f in (PRIORITY_FIELD, FAIRNESS_KEY_FIELD, FAIRNESS_WEIGHT_FIELD)
    ):
        out.update(current.fields())
    return out


def level_order(oldest: Mapping[int, float], now: float, aging_seconds: float) -> list[int]:
    """The levels with ready work in the order they are served (rule 1): ``oldest`` maps each
    level to when its longest-waiting ready message became ready. A level counts as one level
    more urgent for each ``aging_seconds`` that message waited (never above 0); ties go to the
    level whose work waited longest, then to the more urgent level."""

    def rank(level: int) -> tuple[int, float, int]:
        waited = now - oldest[level]
        lift = int(waited // aging_seconds) if aging_seconds > 0 and waited > 0 else 0
        return (max(MIN_PRIORITY, level - lift), oldest[level], level)

    return sorted(oldest, key=rank)


class FairClock:
    """Start-time fair queuing over the keys of one topic (the module docstring, rule 2):
    the tag of a message sent now, and the clock's advance as work is served. The in-memory
    world keeps one per topic; SQLite keeps the same numbers in two tables."""

    __slots__ = ("finish", "virtual")

    def __init__(self) -> None:
        self.virtual = 0.0
        self.finish: dict[str, float] = {}

    def tag(self, key: str, weight: int) -> float:
        start = max(self.virtual, self.finish.get(key, 0.0))
        self.finish[key] = start + 1.0 / weight
        return start

    def served(self, tag: float) -> None:
        self.virtual = max(self.virtual, tag)
        # a key whose finish the clock passed would start from the clock anyway
        for key in [k for k, f in self.finish.items() if f <= self.virtual]:
            del self.finish[key]
