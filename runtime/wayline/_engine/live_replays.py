"""A worker's cache of live replays: the next wake of a run goes on from where the last left it.

When each step of a run has a delivery of its own (a sleep, a hook, a child after each step),
every wake used to replay the workflow function from the run's first event, so a wake's cost
grew with the run's log. A delivery that ends with the workflow suspended, everything it
decided written, may leave its replay here (the coroutine, its folded state and the last seq it
saw); the run's next delivery on this worker reads only the events after that seq and feeds
them to the live coroutine. Replay is deterministic (``_core.replay``): a replay fed events
1..k by one delivery and k+1..n by the next is in the state a fresh replay fed 1..n is in.

Only what that argument covers is fed. The log must continue the cached replay exactly: the
event at its last seq is still the one it saw (a deleted and re-used run id, a repaired log),
and what follows is only what wakes a suspended run from outside it (a step's outcome, a wait's
or a child's end, a hook's payload). Anything a replayer writes (another delivery, here or on
another worker, drove the run meanwhile), a start stamped by another owner, and anything a
person does to the run (cancel, pause, redrive) evicts the entry: the run is then replayed from
its first event, as without the cache. A replay is held by one delivery at a time (``take``
removes it), and memory is bounded by an LRU over runs (``WAYLINE_REPLAY_CACHE_RUNS``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from .._core.events import Event, EventType
from .._core.replay import Replay

_WAKES = frozenset(
    {
        EventType.STEP_STARTED,
        EventType.STEP_RETRYING,
        EventType.STEP_COMPLETED,
        EventType.STEP_FAILED,
        EventType.WAIT_COMPLETED,
        EventType.HOOK_RECEIVED,
        EventType.CHILD_COMPLETED,
    }
)
"""What may follow a cached replay's position: events that settle what the suspended workflow
waits on, none written by a replayer's decision or by a person acting on the run."""


@dataclass(eq=False, slots=True)
class LiveReplay:
    replay: Replay
    last: Event
    """The last event the replay was fed: the log must still hold it at its seq."""
    defer: bool
    """Whether its delivery still deferred step completions (``deferred``): a run that read
    time during one is driven without deferral, as the rebuild it cost would lose the cache."""
    driven: bool = False
    """Set once a delivery drives it: from then on that delivery closes it or keeps it."""

    def continued_by(self, tail: Sequence[Event]) -> list[Event] | None:
        """The events to feed when ``tail`` (the log from the cached last seq on) continues
        this replay exactly; None when it does not (replay from the first event)."""
        if not tail or not _same(tail[0], self.last):
            return None
        new = list(tail[1:])
        seq = self.last.seq
        for event in new:
            seq += 1
            if event.seq != seq or event.type not in _WAKES:
                return None
            if event.type is EventType.STEP_STARTED and event.data.get("ownerMessageId"):
                return None  # another delivery took the step inline: it drove the run
        return new


def _same(a: Event, b: Event) -> bool:
    return (a.seq, a.type, a.correlation_id, a.created_at, a.data) == (
        b.seq,
        b.type,
        b.correlation_id,
        b.created_at,
        b.data,
    )


class LiveReplays:
    """Live replays by run id, least recently left first; at most ``size`` (0: none kept)."""

    def __init__(self, size: int) -> None:
        self.size = max(0, size)
        self._held: OrderedDict[str, LiveReplay] = OrderedDict()
        self.hits = 0
        """Wakes that went on from a live replay (for tests and the bench)."""

    def __len__(self) -> int:
        return len(self._held)

    def take(self, run_id: str) -> LiveReplay | None:
        """The run's live replay, which is no longer held: its delivery gives it back (or
        drops it) when it ends, so two deliveries of one run never drive one coroutine."""
        return self._held.pop(run_id, None)

    def keep(self, entry: LiveReplay) -> None:
        run_id = entry.replay.run_id
        old = self._held.pop(run_id, None)
        if old is not None and old.replay is not entry.replay:
            old.replay.close()
        if self.size == 0:
            entry.replay.close()
            return
        self._held[run_id] = entry
        while len(self._held) > self.size:
            _, evicted = self._held.popitem(last=False)
            evicted.replay.close()

    def drop(self, run_id: str) -> None:
        entry = self._held.pop(run_id, None)
        if entry is not None:
            entry.replay.close()

    def clear(self) -> None:
        """Close every live replay: the worker is closing (or draining)."""
        held, self._held = self._held, OrderedDict()
        for entry in held.values():
            entry.replay.close()


def may_keep(replay: Replay) -> bool:
    """Whether a delivery may leave its replay to the run's next wake: the workflow is
    suspended with everything it decided written, and nothing about the run's end or a
    person's hold on it is under way (those are always replayed from the log)."""
    return (
        not replay.closed
        and replay.root is not None
        and not replay.root.done()
        and replay.terminal is None
        and not replay.provisional
        and not replay.needs_stamp
        and not replay.ending.unwinding
        and not replay.ending.paused
        and not replay.ending.cancel_requested
        and not (replay.new_steps or replay.new_hooks or replay.new_waits)
        and not (replay.new_children or replay.new_disposals or replay.new_patches)
        and not replay.new_attributes
        and replay.last_seq > 0
    )
