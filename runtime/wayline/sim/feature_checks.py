"""The invariants of the features after the order workload, read from the store's logs at the
end of a seed and from what the probe saw (docs/sdk.md "Flow control", "Bounded histories",
docs/day2.md "Fork and redrive" and "Pause").

- A rate-limited key never hands out more tokens than ``burst + rate x T`` over any window of
  T seconds, and a step waiting for a token spends no attempt: each ``step_started`` of a
  limited step had a token taken for its holder.
- A debounced run runs the input of its last start, begins a full period after it, and takes
  no start once it began.
- A continue_as_new chain has one live run at a time: a run starts only once the run before it
  ended; and each run carries the first run's priority and fairness key.
- A redrive is recorded once per failure, and no body of a step that completed before the
  failed step runs again; a fork runs no step before its fork point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .._core.events import RUN_TERMINAL_EVENTS, STEP_TERMINAL_EVENTS, Event, EventType
from .._core.forks import FORKED_FROM
from ..worlds.memory import MemoryStore

#: Seconds of slack on a world stamp compared with another (the stamps are virtual, but a
#: float sum of many small latencies is not exact).
_SLACK = 1e-6


@dataclass(slots=True)
class Seen:
    """What the probe saw of the new flows while they ran."""

    tokens: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    """Bucket key to the (world time, holder) of every token taken."""
    indexed: dict[str, list[str]] = field(default_factory=dict)
    """Run id to the versions its ``sim.index`` bodies ran with."""
    bodies: list[tuple[str, str, int]] = field(default_factory=list)
    """(run id, body name, redrives in the run's log when it began) of every body."""


def check_tokens(
    seen: Seen, rates: Mapping[str, tuple[float, int]], violate: Callable[[str], None]
) -> None:
    """No window of the grants of a key holds more than its burst and refill allow."""
    for key, grants in sorted(seen.tokens.items()):
        per_second, burst = rates[key]
        times = sorted(t for t, _ in grants)
        for i, first in enumerate(times):
            for j in range(i, len(times)):
                allowed = burst + per_second * (times[j] - first) + _SLACK
                if j - i + 1 > allowed:
                    violate(
                        f"rate key {key} gave {j - i + 1} tokens in "
                        f"{times[j] - first:.3f}s, above burst {burst} + {per_second}/s"
                    )
                    return


def check_paced_log(
    run_id: str, log: Sequence[Event], seen: Seen, step: str, violate: Callable[[str], None]
) -> None:
    """Every attempt of the rate-limited step ``step`` began with a token of its own."""
    holders = {h for grants in seen.tokens.values() for _, h in grants}
    taken: dict[str, int] = {}
    for grants in seen.tokens.values():
        for _, holder in grants:
            taken[holder] = taken.get(holder, 0) + 1
    names = _step_names(log)
    started: dict[str, int] = {}
    for e in log:
        if e.type is EventType.STEP_STARTED and names.get(str(e.correlation_id)) == step:
            started[str(e.correlation_id)] = started.get(str(e.correlation_id), 0) + 1
    for cid, n in sorted(started.items()):
        holder = f"{run_id}:{cid}"
        got = taken.get(holder, 0) if holder in holders else 0
        if n > got:
            violate(f"step {run_id[-6:]}/{cid} started {n} attempts on {got} tokens")


def check_debounced_log(
    run_id: str, log: Sequence[Event], seen: Seen, period: float, violate: Callable[[str], None]
) -> None:
    """The run ran its last start's input, a full period after that start, and took no start
    once it began."""
    short = run_id[-6:]
    inputs = [e for e in log if e.type in (EventType.RUN_CREATED, EventType.RUN_DEBOUNCED)]
    began = next((e for e in log if e.type is EventType.RUN_STARTED), None)
    if began is None or not inputs:
        return
    late = [e for e in inputs if e.seq > began.seq]
    if late:
        violate(f"debounced run {short} took a start (#{late[0].seq}) after it began")
    before = [e for e in inputs if e.seq < began.seq]
    last = before[-1]
    if began.created_at + 1.0 < last.created_at + period:
        violate(
            f"debounced run {short} began {began.created_at - last.created_at:.3f}s after "
            f"its last start, within its period of {period:g}s"
        )
    want = (last.data.get("input") or {}).get("args", [None, None])
    version = want[1] if isinstance(want, list) and len(want) > 1 else None
    for ran in seen.indexed.get(run_id, []):
        if ran != version:
            violate(f"debounced run {short} ran version {ran}, not its last start's {version}")


def check_chain(store: MemoryStore, violate: Callable[[str], None]) -> None:
    """A run of a continue_as_new chain starts only once the run before it ended, and has its
    priority and fairness key."""
    for run_id, info in sorted(store.runs.items()):
        following = info.continued_as
        if following is None:
            continue
        after = store.runs.get(following)
        if after is not None and after.ordering != info.ordering:
            violate(
                f"chain run {following[-6:]} is ordered {after.ordering}, "
                f"not as run {run_id[-6:]} before it ({info.ordering})"
            )
        ended = [e for e in store.logs.get(run_id, ()) if e.type in RUN_TERMINAL_EVENTS]
        started = [e for e in store.logs.get(following, ()) if e.type is EventType.RUN_STARTED]
        if ended and started and started[0].created_at + _SLACK < ended[0].created_at:
            violate(f"chain run {following[-6:]} started before run {run_id[-6:]} before it ended")


def check_redrives(run_id: str, log: Sequence[Event], violate: Callable[[str], None]) -> None:
    """A run's ends and redrives alternate (one redrive per failure, each after a failure),
    and a step ends once per redrive of it and once more."""
    short = run_id[-6:]
    last: EventType | None = None
    for e in log:
        if e.type in RUN_TERMINAL_EVENTS or e.type is EventType.RUN_REDRIVEN:
            kind = EventType.RUN_REDRIVEN if e.type is EventType.RUN_REDRIVEN else None
            if kind is not None and last is not EventType.RUN_FAILED:
                violate(f"run {short} has a run_redriven (#{e.seq}) not after a failure")
            if kind is None and last is not None and last is not EventType.RUN_REDRIVEN:
                violate(f"run {short} has a terminal event (#{e.seq}) after its end")
            last = e.type
    ends: dict[str, int] = {}
    redriven: dict[str, int] = {}
    for e in log:
        cid = e.correlation_id
        if cid is None:
            continue
        if e.type in STEP_TERMINAL_EVENTS:
            ends[cid] = ends.get(cid, 0) + 1
        elif e.type is EventType.RUN_REDRIVEN:
            redriven[cid] = redriven.get(cid, 0) + 1
    for cid, n in sorted(ends.items()):
        if n > 1 + redriven.get(cid, 0):
            violate(f"step {short}/{cid} has {n} terminal events")


def check_rerun_bodies(
    store: MemoryStore, seen: Seen, first_step: str, violate: Callable[[str], None]
) -> None:
    """No body of ``first_step`` (it completes before the step that fails) runs in a fork
    from a later step, nor in a run after its redrive."""
    for run_id, name, redrives in seen.bodies:
        if name != first_step:
            continue
        log = store.logs.get(run_id, [])
        if log and log[0].data.get(FORKED_FROM) is not None:
            violate(f"fork {run_id[-6:]} ran {name}, a step before its fork point")
        elif redrives:
            violate(f"run {run_id[-6:]} ran {name} again after its redrive")


def paused_when_started(log: Sequence[Event], step_id: str) -> int | None:
    """The seq of the pause in force when the step's last attempt was recorded as started, if
    it was started while the run was paused."""
    paused: int | None = None
    in_force: int | None = None
    for e in log:
        if e.type is EventType.RUN_PAUSED:
            paused = e.seq
        elif e.type is EventType.RUN_UNPAUSED:
            paused = None
        elif e.type is EventType.STEP_STARTED and e.correlation_id == step_id:
            in_force = paused
    return in_force


def _step_names(log: Sequence[Event]) -> dict[str, str]:
    return {
        str(e.correlation_id): str(e.data.get("stepName"))
        for e in log
        if e.type is EventType.STEP_CREATED
    }
