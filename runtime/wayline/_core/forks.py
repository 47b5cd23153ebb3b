"""Which of a run's events a fork of it starts from (pure: a function of the old log).

A fork is a new run whose log is the old run's up to one step's first attempt: what the
workflow recorded before that step is reused as recorded, and that step and every later one
run again, with the code the workers run now. The fork point is always a forward step (the
Nth call of a step name, ``#N`` counted from 1 in log order). What came before it is carried
by kind (docs/day2.md, "Fork and redrive"):

- a step that ended (completed or failed) keeps its whole history; one still open keeps only
  its creation, so the fork runs it again;
- a sleep, a hook's timeout or a child's deadline keeps its creation, and its completion if
  it fired (one still pending fires in the fork at the time it was set for);
- a hook is carried once it is disposed, or once the old run has ended (its token was freed
  with the end: the fork records the hook's disposal after what it carries of it), never
  while the old run holds its token, which would be claimed twice; a child is carried only
  once its end is reported (the child runs under the old run as its parent); a hook or child
  still open before the fork point refuses the fork;
- ``run_started``, patch markers and search attributes are carried; the run's other phases
  (a pause, a block, a cancel request, the saga unwind) belong to the old run and are not.

Events of one entity stay in log order. An entity that ended after the fork point has its end
carried with its creation, ahead of nothing the fork replays differently: the fork point's
step and every later call are absent from the new log, so the workflow calls them anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ForkRefusedError
from .events import Event, EventType, NewEvent, entity_kind

FORKED_FROM = "forkedFrom"
"""``run_created``'s field on a fork: ``{"runId", "step", "occurrence", "stepId"}``."""
KEY_RUN = "keyRunId"
"""``run_created``'s field on a fork: the run whose id a step's idempotency key is made of
(the run the chain of forks began with), so a re-run step keeps the key it had there."""

_NOT_CARRIED = frozenset(
    {
        "parent",  # a fork is nobody's child: its end is reported to no parent
        "businessId",  # the fork's own, when it is given one
        FORKED_FROM,
        # a fork begins no chain of continue_as_new: it is a run of its own
        "continuedFrom",
        "firstRunId",
        "generation",
        # a fork begins at once: no quiet period of a debounced start to wait out again
        "debounce",
    }
)


@dataclass(frozen=True, slots=True)
class ForkPoint:
    step: str
    occurrence: int
    """1-based: the Nth call of ``step`` in the run."""
    step_id: str
    seq: int
    """The sequence number of the step's ``step_created``: the fork keeps what came before."""


def parse_step(text: str) -> tuple[str, int]:
    """``NAME`` or ``NAME#N`` (N counted from 1) as a step name and an occurrence."""
    name, sep, number = text.rpartition("#")
    if not sep:
        return text, 1
    if not name or not number.isdigit() or int(number) < 1:
        raise ForkRefusedError(f"a step is NAME or NAME#N, N a whole number from 1, not {text!r}")
    return name, int(number)


def _forward_calls(events: Sequence[Event]) -> list[tuple[str, Event]]:
    calls = []
    for event in events:
        if event.type is EventType.STEP_CREATED and not event.data.get("compensates"):
            calls.append((str(event.data.get("stepName")), event))
    return calls


def fork_point(run_id: str, events: Sequence[Event], step: str, occurrence: int = 1) -> ForkPoint:
    """The ``occurrence``-th call of ``step`` in the log; :class:`ForkRefusedError` naming the
    calls there are when it has none."""
    if occurrence < 1:
        raise ForkRefusedError(f"an occurrence is counted from 1, not {occurrence}")
    calls = _forward_calls(events)
    same = [event for name, event in calls if name == step]
    if len(same) >= occurrence:
        created = same[occurrence - 1]
        return ForkPoint(step, occurrence, str(created.correlation_id), created.seq)
    counts: dict[str, int] = {}
    for name, _ in calls:
        counts[name] = counts.get(name, 0) + 1
    there = ", ".join(f"{n} (x{c})" if c > 1 else n for n, c in counts.items()) or "none"
    if same:
        raise ForkRefusedError(
            f"run {run_id} called step {step!r} {len(same)} time"
            f"{'s' if len(same) != 1 else ''}; there is no #{occurrence}"
        )
    raise ForkRefusedError(f"run {run_id} has no step {step!r} (its steps: {there})")


def forked_history(
    run_id: str,
    events: Sequence[Event],
    point: ForkPoint,
    created: Mapping[str, Any],
    definition: Mapping[str, Any] | None,
    *,
    ended: bool = False,
) -> list[NewEvent]:
    """The fork's log: ``run_created`` with ``created``'s data, then what the old run recorded
    before ``point``, by the rules of the module docstring. ``definition``: the identity the
    fork's ``run_started`` pins (None: it pins none, and a worker of the name drives it).
    ``ended``: the old run has ended (its hooks' tokens are free)."""
    before = [e for e in events if e.seq < point.seq]
    kept, undisposed = _kept_entities(run_id, events, before, ended)
    out = [NewEvent(EventType.RUN_CREATED, data=dict(created))]
    for event in events:
        cid = event.correlation_id
        if entity_kind(event.type) is not None:
            if cid in kept:
                out.append(NewEvent(event.type, cid, dict(event.data)))
        elif event.seq >= point.seq:
            continue
        elif event.type is EventType.RUN_STARTED:
            data = {"definition": dict(definition)} if definition is not None else {}
            out.append(NewEvent(EventType.RUN_STARTED, data=data))
        elif event.type in (EventType.PATCH_MARKED, EventType.ATTRIBUTES_SET):
            out.append(NewEvent(event.type, cid, dict(event.data)))
    out += [NewEvent(EventType.HOOK_DISPOSED, cid) for cid in undisposed]
    return out


def _kept_entities(
    run_id: str, events: Sequence[Event], before: Sequence[Event], ended: bool
) -> tuple[set[str], list[str]]:
    """The correlation ids whose events the fork carries, and the hooks of an ended run it
    records the disposal of; refuses an open hook or child."""
    created: dict[str, EventType] = {}
    compensations: set[str] = set()
    for event in before:
        if event.type in _CREATES and event.correlation_id:
            created[event.correlation_id] = event.type
            if event.data.get("compensates"):
                compensations.add(event.correlation_id)
    closed = {
        str(e.correlation_id)
        for e in events
        if e.type in (EventType.HOOK_DISPOSED, EventType.CHILD_COMPLETED)
    }
    undisposed = []
    for cid, kind in created.items():
        if kind is EventType.HOOK_CREATED and cid not in closed and ended:
            undisposed.append(cid)
        elif kind is EventType.HOOK_CREATED and cid not in closed:
            raise ForkRefusedError(
                f"hook {cid} of run {run_id} is still open before the fork point; fork from a "
                "step before it, or once the run is past it"
            )
        if kind is EventType.CHILD_CREATED and cid not in closed:
            raise ForkRefusedError(
                f"child {cid} of run {run_id} has not ended; fork from a step before it, or "
                "once the child has ended"
            )
    return set(created) - compensations, undisposed


_CREATES = frozenset(
    {
        EventType.STEP_CREATED,
        EventType.HOOK_CREATED,
        EventType.WAIT_CREATED,
        EventType.CHILD_CREATED,
    }
)


def forked_data(
    old: Mapping[str, Any], run_id: str, point: ForkPoint, business_id: str | None
) -> dict[str, Any]:
    """The fork's ``run_created`` data: the old run's (its workflow, input, queue, namespace,
    memo, search attributes), without its parent or business id, with the link to it."""
    data = {k: v for k, v in old.items() if k not in _NOT_CARRIED}
    key_run = old.get(KEY_RUN)
    data[KEY_RUN] = key_run if isinstance(key_run, str) else run_id
    data[FORKED_FROM] = {
        "runId": run_id,
        "step": point.step,
        "occurrence": point.occurrence,
        "stepId": point.step_id,
    }
    if business_id is not None:
        data["businessId"] = business_id
    return data


def forked_from(attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A run's link to the run it was forked from (``FORKED_FROM``), or None."""
    link = attributes.get(FORKED_FROM)
    return link if isinstance(link, Mapping) and isinstance(link.get("runId"), str) else None


def key_run_id(run_id: str, attributes: Mapping[str, Any]) -> str:
    """The run id a step of ``run_id`` makes its idempotency key from (see ``KEY_RUN``)."""
    key_run = attributes.get(KEY_RUN)
    return key_run if isinstance(key_run, str) and key_run else run_id
