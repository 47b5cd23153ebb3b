"""The one projection of a run's log: typed event payloads and the fold every reader uses.

An event's ``data`` is read in exactly one place, :func:`payload`, which turns it into one
frozen dataclass per event type; everything else matches on those classes. :func:`run_changes`
folds them into the run view a world stores (``RunInfo``), and :class:`RunView` folds a whole
log into steps (with their attempts), hooks, waits, children and the run's phases: what the
CLI timeline prints, what the operator counts, what recovery asks ("is this run idle?") and
what a queued step delivery needs to know about its step. The replay (``replay.Replay``)
matches the same payloads to settle the workflow's futures.

Adding an event type is one ``EventType`` member, one payload class here, and a case in each
``match`` below; ``assert_never`` makes mypy name every ``match`` that misses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Any, assert_never

from . import ordering as ordering_of_work
from . import search_attributes
from .events import (
    STATUS_AFTER,
    STATUS_BEFORE,
    Event,
    EventType,
    RunStatus,
    status_after_lift,
    status_before_block,
)
from .retry import EXHAUSTED

# --- typed payloads: one class per event type ------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunCreated:
    workflow: str
    input: Any
    attributes: Mapping[str, Any]
    """Everything else it records: revision, definition, parent, queue, namespace,
    businessId."""


@dataclass(frozen=True, slots=True)
class RunStarted:
    definition: Mapping[str, Any] | None
    """The definition a run started by name is pinned to (None: it recorded one already)."""


@dataclass(frozen=True, slots=True)
class RunCompleted:
    output: Any


@dataclass(frozen=True, slots=True)
class RunFailed:
    error: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class RunCancelled:
    reason: str
    terminated: bool = False
    """Ended by ``terminate`` (no compensations ran), not by a cancel a worker carried out."""


@dataclass(frozen=True, slots=True)
class RunContinuedAsNew:
    next_run_id: str
    """The run that goes on under the same identity (``wayline.continue_as_new``)."""
    next: Mapping[str, Any]
    """The next run's ``run_created`` data, recorded with the end so that a delivery after a
    crash creates that run exactly as the first one would have."""


@dataclass(frozen=True, slots=True)
class RunCancelRequested:
    reason: str


@dataclass(frozen=True, slots=True)
class RunCompensating:
    unwind: Mapping[str, Any]
    """``{"reason": "failed", "error": ...}`` or ``{"reason": "cancelled", "detail": ...}``."""


@dataclass(frozen=True, slots=True)
class Reversal:
    """A compensation the unwind has not run: the compensation step's name, and the forward
    step it would reverse (its name and correlation id)."""

    step: str
    forward: str
    forward_id: str

    def to_json(self) -> dict[str, str]:
        return {"step": self.step, "forward": self.forward, "forwardId": self.forward_id}

    def __str__(self) -> str:
        return f"{self.step} (reverses {self.forward_id})"


def _reversals(value: Any) -> tuple[Reversal, ...] | None:
    """The ``notRun`` list of a park or an abandon; None when the event has none (a log
    written before the list was recorded, or a park by a worker that did not record it)."""
    if not isinstance(value, list):
        return None
    return tuple(
        Reversal(str(r.get("step")), str(r.get("forward")), str(r.get("forwardId")))
        for r in value
        if isinstance(r, Mapping)
    )


@dataclass(frozen=True, slots=True)
class RunCompensationStuck:
    step: str
    error: Mapping[str, Any]
    step_id: str | None = None
    not_run: tuple[Reversal, ...] | None = None
    """The reversals after this one that the unwind has yet to run (None in older logs)."""


@dataclass(frozen=True, slots=True)
class RunCompensationResumed:
    pass


@dataclass(frozen=True, slots=True)
class RunCompensationAbandoned:
    not_run: tuple[Reversal, ...] | None = None
    """The reversals the abandon gave up without running them, as the park listed them
    (None in older logs, or when the park did not list them)."""


@dataclass(frozen=True, slots=True)
class RunBlocked:
    why: Mapping[str, Any]
    """``{"code", "message", "required"}``: which definition the run waits for."""
    before: RunStatus | None = None
    """The status the block was put over (``statusBefore``); None in older logs."""


@dataclass(frozen=True, slots=True)
class RunUnblocked:
    status: RunStatus = RunStatus.RUNNING
    """The status the run returns to: the one its block was put over (older logs: running)."""


@dataclass(frozen=True, slots=True)
class RunPaused:
    reason: str
    by: str
    """Who asked: ``client`` (a person, through the client or the CLI), ``retry`` (a step's
    ``on_exhausted="pause"``), or what the caller named."""
    before: RunStatus = RunStatus.RUNNING
    """The status the run was paused from, which the unpause returns it to."""
    step_id: str | None = None
    """The step whose attempts ran out (``by == "retry"``); it gets a fresh budget."""


@dataclass(frozen=True, slots=True)
class RunUnpaused:
    reason: str
    by: str
    status: RunStatus = RunStatus.RUNNING
    """The status the run returns to: the one it was paused from."""


@dataclass(frozen=True, slots=True)
class RunRedriven:
    """A failed run re-driven in place from its failed step (``step_id``): running again,
    the step with a fresh attempt budget (its attempts are numbered from 1 again)."""

    reason: str
    by: str
    step_id: str
    step: str
    """The step's name."""


def _paused(d: Data) -> RunPaused:
    return RunPaused(
        str(d.get("reason") or ""),
        str(d.get("by") or "client"),
        _pausable(d.get(STATUS_BEFORE)),
        str(d["stepId"]) if d.get("stepId") else None,
    )


def _redriven(d: Data) -> RunRedriven:
    return RunRedriven(
        str(d.get("reason") or ""),
        str(d.get("by") or "client"),
        str(d.get("stepId") or ""),
        str(d.get("step") or ""),
    )


def _pausable(value: Any) -> RunStatus:
    return RunStatus.PENDING if value == str(RunStatus.PENDING) else RunStatus.RUNNING


@dataclass(frozen=True, slots=True)
class PatchMarked:
    patch_id: str


@dataclass(frozen=True, slots=True)
class RunDebounced:
    input: Any
    """The stored input that replaces the run's (``wayline.Debounce``: the last start's)."""


@dataclass(frozen=True, slots=True)
class AttributesSet:
    values: Mapping[str, Any]
    """The stored values set (``search_attributes.encode``); None removes one."""


@dataclass(frozen=True, slots=True)
class HistoryLarge:
    events: int
    """How many events the log held when the warning was recorded."""
    threshold: int
    """``WAYLINE_HISTORY_WARN_EVENTS`` as the worker that recorded it had it."""


@dataclass(frozen=True, slots=True)
class StepCreated:
    step_name: str
    input: Any
    occurrence: int
    compensates: str | None = None
    """For a compensation: the forward step's correlation id."""
    epoch: int = 0
    forward_result: Any = None


@dataclass(frozen=True, slots=True)
class StepStarted:
    attempt: int | None
    owner_message_id: str | None
    """Set on an inline (owned) start; a bare start clears ownership."""
    lease: float | None = None
    """The owner's ``WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS`` (None in older logs)."""


@dataclass(frozen=True, slots=True)
class StepRetrying:
    error: Mapping[str, Any] | None
    retry_after: float | None
    schedule: Mapping[str, Any] | None = None
    """How the delay was chosen: ``attempt``, ``delay``, ``source`` (``policy``,
    ``retry_after``, or ``exhausted``) and the ``policy`` (``RetryPolicy.describe``); None in
    older logs."""

    @property
    def fresh(self) -> bool:
        """The attempts ran out and the run paused (``on_exhausted="pause"``): the step's
        next attempt starts a fresh budget."""
        return (self.schedule or {}).get("source") == EXHAUSTED


@dataclass(frozen=True, slots=True)
class StepCompleted:
    result: Any


@dataclass(frozen=True, slots=True)
class StepFailed:
    error: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class HookCreated:
    token: str
    type: str | None = None
    """A typed hook's payload class (``module:Qualname``)."""
    shape: Mapping[str, Any] | None = None
    """A typed hook's required fields and their JSON types (``wayline._sdk.hooks.shape``)."""
    metadata: Any = None
    """``metadata=`` at creation, for the people and tools that resume it."""


@dataclass(frozen=True, slots=True)
class HookReceived:
    payload: Any


@dataclass(frozen=True, slots=True)
class HookDisposed:
    pass


@dataclass(frozen=True, slots=True)
class WaitCreated:
    resume_at: float | None


@dataclass(frozen=True, slots=True)
class WaitCompleted:
    early: bool = False
    """Fired before its time by ``Client.wake_up`` (stamped with the real time)."""


@dataclass(frozen=True, slots=True)
class ChildCreated:
    child_run_id: str
    workflow: str
    deadline: float | None


@dataclass(frozen=True, slots=True)
class ChildCompleted:
    status: str
    output: Any
    error: Mapping[str, Any] | None


Payload = (
    RunCreated
    | RunStarted
    | RunCompleted
    | RunFailed
    | RunCancelled
    | RunContinuedAsNew
    | RunCancelRequested
    | RunCompensating
    | RunCompensationStuck
    | RunCompensationResumed
    | RunCompensationAbandoned
    | RunBlocked
    | RunUnblocked
    | RunPaused
    | RunUnpaused
    | RunRedriven
    | PatchMarked
    | AttributesSet
    | HistoryLarge
    | RunDebounced
    | StepCreated
    | StepStarted
    | StepRetrying
    | StepCompleted
    | StepFailed
    | HookCreated
    | HookReceived
    | HookDisposed
    | WaitCreated
    | WaitCompleted
    | ChildCreated
    | ChildCompleted
)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def payload(event: Event) -> Payload:
    """The event's ``data``, typed. The only reader of ``Event.data`` outside the worlds."""
    return _DECODERS[event.type](event.data)


Data = Mapping[str, Any]


def _step_created(d: Data) -> StepCreated:
    compensates = d.get("compensates")
    return StepCreated(
        str(d.get("stepName")),
        d.get("input"),
        int(d.get("occurrence") or 0),
        str(compensates) if compensates else None,
        int(d.get("epoch") or 0),
        d.get("forwardResult"),
    )


def _step_started(d: Data) -> StepStarted:
    attempt, owner = d.get("attempt"), d.get("ownerMessageId")
    return StepStarted(
        int(attempt) if attempt else None,
        str(owner) if owner is not None else None,
        _number(d.get("lease")),
    )


_SCHEDULE_KEYS = ("attempt", "delay", "source", "policy")


def _step_retrying(d: Data) -> StepRetrying:
    schedule = {k: d[k] for k in _SCHEDULE_KEYS if k in d}
    return StepRetrying(_mapping(d.get("error")), _number(d.get("retryAfter")), schedule or None)


def _hook_created(d: Data) -> HookCreated:
    kind = d.get("type")
    return HookCreated(
        str(d.get("token", "")),
        str(kind) if kind else None,
        _mapping(d.get("shape")),
        d.get("metadata"),
    )


def _run_created(d: Data) -> RunCreated:
    rest = {k: v for k, v in d.items() if k not in ("workflow", "input")}
    return RunCreated(str(d.get("workflow", "")), d.get("input"), rest)


def _continued(d: Data) -> RunContinuedAsNew:
    return RunContinuedAsNew(str(d.get(NEXT_RUN_ID)), _mapping(d.get("next")) or {})


def _compensation_stuck(d: Data) -> RunCompensationStuck:
    return RunCompensationStuck(
        str(d.get("step")),
        dict(d.get("error") or {}),
        str(d["stepId"]) if d.get("stepId") else None,
        _reversals(d.get("notRun")),
    )


def _unpaused(d: Data) -> RunUnpaused:
    return RunUnpaused(
        str(d.get("reason") or ""), str(d.get("by") or "client"), _pausable(d.get(STATUS_AFTER))
    )


def _decoder(t: EventType) -> Callable[[Data], Payload]:
    """How ``data`` of type ``t`` is read. Built into a table once (a ``match`` on enum values
    costs a lookup per case); the ``match`` is what makes mypy check every type is covered."""
    match t:
        case EventType.RUN_CREATED:
            return _run_created
        case EventType.RUN_STARTED:
            return lambda d: RunStarted(_mapping(d.get("definition")))
        case EventType.RUN_COMPLETED:
            return lambda d: RunCompleted(d.get("output"))
        case EventType.RUN_FAILED:
            return lambda d: RunFailed(dict(d.get("error") or {}))
        case EventType.RUN_CANCELLED:
            return lambda d: RunCancelled(str(d.get("reason", "")), d.get("terminated") is True)
        case EventType.RUN_CONTINUED_AS_NEW:
            return _continued
        case EventType.RUN_CANCEL_REQUESTED:
            return lambda d: RunCancelRequested(str(d.get("reason") or ""))
        case EventType.RUN_COMPENSATING:
            return lambda d: RunCompensating(dict(d))
        case EventType.RUN_COMPENSATION_STUCK:
            return _compensation_stuck
        case EventType.RUN_COMPENSATION_RESUMED:
            return lambda d: RunCompensationResumed()
        case EventType.RUN_COMPENSATION_ABANDONED:
            return lambda d: RunCompensationAbandoned(_reversals(d.get("notRun")))
        case EventType.RUN_BLOCKED:
            return lambda d: RunBlocked(dict(d), status_before_block(d))
        case EventType.RUN_UNBLOCKED:
            return lambda d: RunUnblocked(status_after_lift(d))
        case EventType.RUN_PAUSED:
            return _paused
        case EventType.RUN_UNPAUSED:
            return _unpaused
        case EventType.RUN_REDRIVEN:
            return _redriven
        case EventType.PATCH_MARKED:
            return lambda d: PatchMarked(str(d.get("patchId")))
        case EventType.ATTRIBUTES_SET:
            return lambda d: AttributesSet(_mapping(d.get("set")) or {})
        case EventType.HISTORY_LARGE:
            return lambda d: HistoryLarge(int(d.get("events") or 0), int(d.get("threshold") or 0))
        case EventType.RUN_DEBOUNCED:
            return lambda d: RunDebounced(d.get("input"))
        case EventType.STEP_CREATED:
            return _step_created
        case EventType.STEP_STARTED:
            return _step_started
        case EventType.STEP_RETRYING:
            return _step_retrying
        case EventType.STEP_COMPLETED:
            return lambda d: StepCompleted(d.get("result"))
        case EventType.STEP_FAILED:
            return lambda d: StepFailed(_mapping(d.get("error")))
        case EventType.HOOK_CREATED:
            return _hook_created
        case EventType.HOOK_RECEIVED:
            return lambda d: HookReceived(d.get("payload"))
        case EventType.HOOK_DISPOSED:
            return lambda d: HookDisposed()
        case EventType.WAIT_CREATED:
            return lambda d: WaitCreated(_number(d.get("resumeAt")))
        case EventType.WAIT_COMPLETED:
            return lambda d: WaitCompleted(d.get("early") is True)
        case EventType.CHILD_CREATED:
            return lambda d: ChildCreated(
                str(d.get("childRunId")), str(d.get("workflow")), _number(d.get("deadline"))
            )
        case EventType.CHILD_COMPLETED:
            return lambda d: ChildCompleted(
                str(d.get("status")), d.get("output"), _mapping(d.get("error"))
            )
        case unknown:
            assert_never(unknown)


_DECODERS = {t: _decoder(t) for t in EventType}


# --- the run view a world stores --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    workflow: str
    status: RunStatus
    input: Any = None
    output: Any = None
    error: Mapping[str, Any] | None = None
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    updated_at: float = 0.0
    last_seq: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def search_attributes(self) -> dict[str, Any]:
        """The run's search attributes, typed again (a datetime is a ``datetime``)."""
        return search_attributes.decoded(self.attributes)

    @property
    def business_id(self) -> str | None:
        """The business id the run was started under (``StartOptions(id=...)``), else None."""
        found = self.attributes.get("businessId")
        return found if isinstance(found, str) else None

    @property
    def ordering(self) -> ordering_of_work.Ordering:
        """How the run's work is ordered among all ready work: its priority, fairness key
        and weight (``StartOptions(priority=, fairness_key=, fairness_weight=)``)."""
        return ordering_of_work.of_record(self.attributes)

    @property
    def continued_as(self) -> str | None:
        """The next run of the chain when this one ended by ``wayline.continue_as_new``."""
        if self.status is not RunStatus.CONTINUED_AS_NEW or not isinstance(self.output, Mapping):
            return None
        found = self.output.get(NEXT_RUN_ID)
        return found if isinstance(found, str) else None

    @property
    def continued_from(self) -> str | None:
        """The run this one continues (``wayline.continue_as_new``), else None."""
        found = self.attributes.get(CONTINUED_FROM)
        return found if isinstance(found, str) else None


NEXT_RUN_ID = "nextRunId"
"""The field of a continued run's output (and of its end event) naming its next run."""
CONTINUED_FROM = "continuedFrom"
"""The field of a continuing run's ``run_created`` naming the run it continues."""


def new_run(event: Event) -> RunInfo:
    """The run view a ``run_created`` event opens."""
    created = payload(event)
    assert isinstance(created, RunCreated), "a run view opens with run_created"
    return RunInfo(
        run_id=event.run_id,
        workflow=created.workflow,
        status=RunStatus.PENDING,
        input=created.input,
        created_at=event.created_at,
        updated_at=event.created_at,
        last_seq=event.seq,
        attributes=dict(created.attributes),
    )


_ENTITY_EVENTS = frozenset(t for t in EventType if not t.value.startswith("run_"))


def run_changes(event: Event) -> dict[str, Any]:
    """The run-view fields one (non-creating) event changes; shared by every world."""
    at = event.created_at
    changes: dict[str, Any] = {"updated_at": at, "last_seq": event.seq}
    if event.type in _ENTITY_EVENTS:  # the hot path (a world folds every append): no decoding
        return changes
    match payload(event):
        case RunStarted():
            changes.update(status=RunStatus.RUNNING, started_at=at, error=None)
        case RunCompensating() | RunCompensationResumed():  # a block it ends shows no more
            changes.update(status=RunStatus.COMPENSATING, error=None)
        case RunCompensationStuck():
            changes["status"] = RunStatus.COMPENSATION_STUCK
        case RunBlocked(why):
            changes.update(status=RunStatus.BLOCKED, error=dict(why))
        case RunUnblocked(status):
            changes.update(status=status, error=None)
        case RunPaused(reason, by, _, step_id):
            why = {"code": "PAUSED", "message": reason, "by": by}
            if step_id:
                why["stepId"] = step_id
            changes.update(status=RunStatus.PAUSED, error=why)
        case RunUnpaused(_, _, status):
            changes.update(status=status, error=None)
        case RunRedriven():
            changes.update(status=RunStatus.RUNNING, ended_at=None, error=None, output=None)
        case RunCompleted(output):
            changes.update(status=RunStatus.COMPLETED, ended_at=at, output=output)
        case RunFailed(error):
            changes.update(status=RunStatus.FAILED, ended_at=at, error=dict(error))
        case RunCancelled(reason):
            error = {"code": "RUN_CANCELLED", "message": reason}
            changes.update(status=RunStatus.CANCELLED, ended_at=at, error=error)
        case RunContinuedAsNew(next_run_id):
            # the next run's id is kept where a world stores a run's end (its output), so a
            # handle follows the chain from the run's row alone
            output = {NEXT_RUN_ID: next_run_id}
            changes.update(status=RunStatus.CONTINUED_AS_NEW, ended_at=at, output=output)
        case RunDebounced(replaced):
            changes["input"] = replaced
        case (
            RunCreated()
            | RunCancelRequested()
            | RunCompensationAbandoned()
            | StepCreated()
            | StepStarted()
            | StepRetrying()
            | StepCompleted()
            | StepFailed()
            | HookCreated()
            | HookReceived()
            | HookDisposed()
            | WaitCreated()
            | WaitCompleted()
            | ChildCreated()
            | ChildCompleted()
            | PatchMarked()
            | AttributesSet()
            | HistoryLarge()
        ):
            pass
        case unknown:
            assert_never(unknown)
    return changes


def debounced_until(info: RunInfo, events: Sequence[Event]) -> float | None:
    """When a debounced run that has not begun may begin (the world's time: one period after
    its last start, ``run_created`` or ``run_debounced``), or None: it is not debounced or it
    began (``wayline.Debounce``)."""
    debounce = info.attributes.get("debounce")
    if not isinstance(debounce, Mapping) or info.status is not RunStatus.PENDING:
        return None
    period = debounce.get("period")
    if isinstance(period, bool) or not isinstance(period, int | float):
        return None
    starts = [
        e.created_at for e in events if e.type in (EventType.RUN_CREATED, EventType.RUN_DEBOUNCED)
    ]
    return (max(starts) if starts else info.created_at) + float(period)


def pinned_definition(event: Event) -> dict[str, Any] | None:
    """The definition a ``run_started`` pins on a run started by name (none recorded)."""
    if event.type is not EventType.RUN_STARTED:
        return None
    started = payload(event)
    assert isinstance(started, RunStarted)
    return dict(started.definition) if started.definition is not None else None


def fold_run(info: RunInfo | None, event: Event) -> RunInfo:
    """The run view after one event; shared by every world so their views agree."""
    if event.type is EventType.RUN_CREATED:
        return new_run(event)
    assert info is not None, "fold_run needs run_created first"
    out = _changed(info, run_changes(event))
    pin = pinned_definition(event)
    if pin is not None and "definition" not in info.attributes:
        out = replace(out, attributes={**info.attributes, "definition": pin})
    if event.type is EventType.ATTRIBUTES_SET:
        out = replace(out, attributes=with_search(info.attributes, event))
    return out


_RUN_FIELDS = tuple(f.name for f in fields(RunInfo))
_RUN_VALUES = attrgetter(*_RUN_FIELDS)
_RUN_PLACES = {name: i for i, name in enumerate(_RUN_FIELDS)}


def _changed(info: RunInfo, changes: Mapping[str, Any]) -> RunInfo:
    """``dataclasses.replace(info, **changes)``, made from the fields read in one C call:
    every world folds every append through :func:`fold_run`, and ``replace``'s loop over the
    fields in Python was a few per cent of a simulated seed's CPU."""
    values = list(_RUN_VALUES(info))
    for name, value in changes.items():
        values[_RUN_PLACES[name]] = value
    return RunInfo(*values)


def with_search(attributes: Mapping[str, Any], event: Event) -> dict[str, Any]:
    """A run's ``attributes`` after an ``attributes_set``: its search attributes merged."""
    update = payload(event)
    assert isinstance(update, AttributesSet)
    search = search_attributes.merged(search_attributes.stored(attributes), update.values)
    return {**attributes, search_attributes.SEARCH_KEY: search}


# --- the whole log: steps, hooks, waits, children, phases -------------------------------------


_REFUSALS = frozenset({"MAX_ATTEMPTS_EXCEEDED", "STEP_NOT_FOUND"})
"""The codes of a ``step_failed`` a worker records without running the body (see
``_engine.session._attempts_spent`` and ``_engine.step_delivery._refused``)."""


@dataclass
class Attempt:
    number: int
    started_at: float
    ended_at: float | None = None
    """When its outcome was recorded; None while it runs, and for an ``abandoned`` attempt
    (its body died, or was cut off, and no end was recorded: it has no duration)."""
    outcome: str = "running"  # running | completed | retrying | failed | abandoned
    error: Mapping[str, Any] | None = None
    retry_at: float | None = None
    schedule: Mapping[str, Any] | None = None
    """Why the retry waits that long (``StepRetrying.schedule``), from the log."""

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "outcome": self.outcome,
            "error": dict(self.error) if self.error else None,
            "retryAt": self.retry_at,
            "schedule": dict(self.schedule) if self.schedule else None,
        }


@dataclass
class StepView:
    cid: str
    name: str
    created_at: float
    input: Any = None
    occurrence: int = 0
    status: str = "pending"
    attempts: list[Attempt] = field(default_factory=list)
    ended_at: float | None = None
    result: Any = None
    error: Mapping[str, Any] | None = None
    compensates: str | None = None
    """For a compensation (saga reversal): the id of the forward step it reverses."""
    forward_result: Any = None
    retry_after: float | None = None
    """When the latest ``step_retrying`` asked to be tried again."""
    starts: int = 0
    """How many ``step_started`` events it has."""
    spent: int = 0
    """The starts of its current retry budget: those since the retry that paused the run
    when its attempts ran out (``on_exhausted="pause"``), else all of them."""
    owner: str | None = None
    """The message its latest start was stamped with (seed 000: latest start wins)."""
    last_started_at: float | None = None
    owner_lease: float | None = None
    """The lease its owner recorded in its latest start (None: unowned, or an older log)."""
    saw_retrying: bool = False
    """A ``step_retrying`` lapsed its ownership for good."""

    @property
    def label(self) -> str:
        return f"{self.name} (reverses {self.compensates})" if self.compensates else self.name

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "name": self.name,
            "compensates": self.compensates,
            "status": self.status,
            "createdAt": self.created_at,
            "endedAt": self.ended_at,
            "attempts": [a.to_json() for a in self.attempts],
            "result": self.result,
            "error": dict(self.error) if self.error else None,
        }


@dataclass
class HookView:
    cid: str
    token: str
    created_at: float
    status: str = "waiting"  # waiting | received | timed out | disposed
    timeout_at: float | None = None
    received_at: float | None = None
    payload: Any = None
    type: str | None = None
    """A typed hook's payload class (``module:Qualname``)."""
    shape: Mapping[str, Any] | None = None
    """A typed hook's required fields and their JSON types, as recorded: the console builds
    its form from it."""
    metadata: Any = None
    timed_out_early: bool = False
    """Timed out before its time (``Client.wake_up``, ``wayline runs wake --wait hN.timeout``)."""
    later: list[tuple[float, Any]] = field(default_factory=list)
    """Payloads received after the first (a hook takes payloads until it is disposed), with
    when: ``(received at, payload)``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "token": self.token,
            "type": self.type,
            "shape": self.shape,
            "metadata": self.metadata,
            "status": self.status,
            "createdAt": self.created_at,
            "timeoutAt": self.timeout_at,
            "receivedAt": self.received_at,
            "payload": self.payload,
            "timedOutEarly": self.timed_out_early,
            "later": [{"receivedAt": at, "payload": payload} for at, payload in self.later],
        }


@dataclass
class ChildView:
    cid: str
    run_id: str
    workflow: str
    created_at: float
    status: str = "running"
    """``running`` until the child's end is reported: then its status."""
    ended_at: float | None = None
    deadline_at: float | None = None
    """When the parent stops waiting for it (``ChildOptions(timeout=)``): its deadline wait
    (``cN.deadline``), which is the child's, never a sleep of the parent."""
    deadline_seconds: float | None = None
    deadline_passed_at: float | None = None
    """When the deadline passed with the child's end not reported (the child runs on)."""
    deadline_early: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "runId": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "createdAt": self.created_at,
            "endedAt": self.ended_at,
            "deadlineAt": self.deadline_at,
            "deadlinePassedAt": self.deadline_passed_at,
            "deadlineEarly": self.deadline_early,
        }


@dataclass
class WaitView:
    cid: str
    created_at: float
    resume_at: float
    completed_at: float | None = None
    decided_at: float | None = None
    """Workflow time when the sleep was asked for (the log's time before this batch)."""
    early: bool = False
    """Woken before its time (``Client.wake_up``)."""

    @property
    def seconds(self) -> float:
        return self.resume_at - (self.decided_at or self.created_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "status": "completed" if self.completed_at is not None else "waiting",
            "createdAt": self.created_at,
            "resumeAt": self.resume_at,
            "completedAt": self.completed_at,
            "early": self.early,
        }


def is_sleep(cid: str) -> bool:
    """A plain ``wayline.sleep`` wait (``w3``), not a hook's timeout or a child's deadline."""
    return "." not in cid


def timeout_of(cid: str) -> str:
    """The hook whose timeout wait ``cid`` is (``h1.timeout`` -> ``h1``), or ''."""
    return cid[: -len(".timeout")] if cid.endswith(".timeout") else ""


def deadline_of(cid: str) -> str:
    """The child whose deadline wait ``cid`` is (``c1.deadline`` -> ``c1``), or ''."""
    return cid[: -len(".deadline")] if cid.endswith(".deadline") else ""


# What recovery counts as open work, by the kind of entity: see ``RunView.open_kinds``.
_WORK, _HOOK, _TIMER, _CHILD = "work", "hook", "timer", "child"


@dataclass
class RunView:
    """A run's log folded into what people and recovery ask about. Tolerant: an event about
    an entity it never saw created is skipped, never fatal (a log is read as it is)."""

    run_id: str
    run: RunInfo | None = None
    status: str = "pending"
    """As a person reads it: pending, running, compensating, compensation_stuck, or the end."""
    created_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    steps: dict[str, StepView] = field(default_factory=dict)
    hooks: dict[str, HookView] = field(default_factory=dict)
    waits: dict[str, WaitView] = field(default_factory=dict)
    children: dict[str, str] = field(default_factory=dict)
    """Child runs by correlation id, while not reported back."""
    child_workflows: dict[str, str] = field(default_factory=dict)
    """The workflow of each child run, by correlation id."""
    child_views: dict[str, ChildView] = field(default_factory=dict)
    """Every child run, reported back or not (the timeline's)."""
    stuck: RunCompensationStuck | None = None
    """Why the unwind waits for a person, while it does."""
    order: list[tuple[str, str]] = field(default_factory=list)  # (kind, cid) in creation order
    phases: list[tuple[float, Payload]] = field(default_factory=list)
    """Run-level moments between steps: cancel requests, the saga unwind and its outcome."""
    open: dict[str, str] = field(default_factory=dict)
    """Entities created and not closed, by correlation id: work, hook, timer or child."""
    compensation_resumes: int = 0
    history_large: HistoryLarge | None = None
    """The warning that the log grew past ``WAYLINE_HISTORY_WARN_EVENTS``, once recorded."""
    terminated: bool = False
    """The run was ended by ``terminate``: it ended ``cancelled`` without compensations."""
    last_is_input: bool = False
    """The latest event came from outside the run's own deliveries (a payload, a child's
    end, a cancel request, a person's resume or abandon): the run has work after it."""
    batch_at: float | None = None
    before_batch_at: float | None = None

    def workflow_time(self) -> float | None:
        """What ``wayline.now()`` read when the current batch was decided: the time of the
        last event before it (one append stamps all its events with one time)."""
        return self.before_batch_at

    def step_counts(self) -> dict[str, int]:
        """Forward steps created, completed and failed, and compensation steps created (the
        operator's counts). Compensations are counted apart: counted as completed steps they
        made an unwound run's ``completed/created`` read 3/2."""
        forward = [s for s in self.steps.values() if s.compensates is None]
        return {
            "created": len(forward),
            "completed": sum(1 for s in forward if s.status == "completed"),
            "failed": sum(1 for s in forward if s.status == "failed"),
            "compensations": len(self.steps) - len(forward),
        }

    def open_kinds(self) -> set[str]:
        return set(self.open.values())

    def pending_timers(self) -> dict[str, float]:
        """``{correlation id: resume at}`` of every wait created and not completed, in
        creation order: sleeps (``wN``), hook timeouts (``hN.timeout``) and child deadlines
        (``cN.deadline``). What ``Client.wake_up`` may fire early."""
        out: dict[str, float] = {}
        for cid, kind in self.open.items():
            if kind != _TIMER:
                continue
            hook = self.hooks.get(timeout_of(cid))
            wait = self.waits.get(cid)
            at = hook.timeout_at if hook is not None else wait.resume_at if wait else None
            if at is not None:
                out[cid] = at
        return out

    def apply(self, event: Event) -> None:
        at, cid = event.created_at, event.correlation_id or ""
        if at != self.batch_at:
            self.before_batch_at, self.batch_at = self.batch_at, at
        p = payload(event)
        if self.run is not None or isinstance(p, RunCreated):
            self.run = fold_run(self.run, event)
        self.last_is_input = isinstance(
            p,
            RunCreated
            | HookReceived
            | ChildCompleted
            | RunCancelRequested
            | RunCompensationResumed
            | RunCompensationAbandoned
            | RunPaused
            | RunUnpaused
            | RunRedriven,
        )
        match p:
            case RunCreated():
                self.created_at = at
            case RunStarted():
                self.started_at, self.status = at, "running"
            case RunCompleted() | RunFailed() | RunCancelled() | RunContinuedAsNew():
                self._end(p, at)
            case RunRedriven(step_id=step_id):
                self._redriven(p, at, self.steps.get(step_id))
            case (
                RunCancelRequested()
                | RunCompensating()
                | RunCompensationStuck()
                | RunCompensationResumed()
                | RunCompensationAbandoned()
                | RunPaused()
                | RunUnpaused()
            ):
                self._phase(p, at)
            case RunBlocked() | RunUnblocked() | PatchMarked() | AttributesSet() | RunDebounced():
                pass  # the run view (``run``) has it; the timeline shows it in the header
            case HistoryLarge():
                self.history_large = p
            case StepCreated():
                self._step_created(cid, p, at)
            case StepStarted() | StepRetrying() | StepCompleted() | StepFailed():
                if cid in self.steps:
                    self._step_event(self.steps[cid], p, at)
            case HookCreated(token, kind, shape, metadata):
                self.hooks[cid] = HookView(
                    cid, token, at, type=kind, shape=shape, metadata=metadata
                )
                self.order.append(("hook", cid))
                self.open[cid] = _HOOK
            case HookReceived(value):
                self._hook_received(self.hooks.get(cid), value, at)
            case HookDisposed():
                self.open.pop(cid, None)
                if cid in self.hooks and self.hooks[cid].status == "waiting":
                    self.hooks[cid].status = "disposed"
            case WaitCreated(resume_at):
                self._wait_created(cid, at if resume_at is None else resume_at, at)
            case WaitCompleted(early):
                self._wait_completed(cid, at, early)
            case ChildCreated(child_run_id, workflow):
                self.children[cid] = child_run_id
                self.child_workflows[cid] = workflow
                self.open[cid] = _CHILD
                self.child_views[cid] = ChildView(cid, child_run_id, workflow, at)
                self.order.append(("child", cid))
            case ChildCompleted(status):
                self.children.pop(cid, None)
                self.open.pop(cid, None)
                child = self.child_views.get(cid)
                if child is not None:
                    child.status, child.ended_at = status, at
            case unknown:
                assert_never(unknown)

    @staticmethod
    def _hook_received(hook: HookView | None, value: Any, at: float) -> None:
        if hook is not None and hook.received_at is None:
            hook.status, hook.received_at, hook.payload = "received", at, value
        elif hook is not None:
            hook.later.append((at, value))

    def _end(
        self, p: RunCompleted | RunFailed | RunCancelled | RunContinuedAsNew, at: float
    ) -> None:
        self.ended_at = at
        for hook in self.hooks.values():
            if hook.status == "waiting":
                hook.status = "disposed"  # an ended run's hooks take no more payloads
        if isinstance(p, RunContinuedAsNew):
            self.status = "continued_as_new"
        elif isinstance(p, RunCompleted):
            self.status = "completed"
        else:
            self.status = "failed" if isinstance(p, RunFailed) else "cancelled"
            self.terminated = isinstance(p, RunCancelled) and p.terminated

    def _redriven(self, p: RunRedriven, at: float, step: StepView | None) -> None:
        """The run is running again and its failed step open, with a fresh budget: its failed
        attempt stays in its history, and the next is numbered from 1 again."""
        self.ended_at, self.status = None, "running"
        self.phases.append((at, p))
        self.order.append(("phase", str(len(self.phases) - 1)))
        if step is not None and step.status == "failed":
            step.status, step.ended_at, step.error, step.spent = "pending", None, None, 0
            self.open[step.cid] = _WORK

    def _phase(self, p: Payload, at: float) -> None:
        self.phases.append((at, p))
        self.order.append(("phase", str(len(self.phases) - 1)))
        if isinstance(p, RunCompensating | RunCompensationResumed):
            self.status, self.stuck = "compensating", None
        elif isinstance(p, RunCompensationStuck):
            self.status, self.stuck = "compensation_stuck", p
        elif isinstance(p, RunCompensationAbandoned):
            self.stuck = None
        elif isinstance(p, RunPaused):
            self.status = "paused"
        elif isinstance(p, RunUnpaused):
            self.status = str(p.status)
        if isinstance(p, RunCompensationResumed):
            self.compensation_resumes += 1

    def _step_created(self, cid: str, p: StepCreated, at: float) -> None:
        self.steps[cid] = StepView(
            cid,
            p.step_name or cid,
            at,
            input=p.input,
            occurrence=p.occurrence,
            compensates=p.compensates,
            forward_result=p.forward_result,
        )
        self.order.append(("step", cid))
        self.open[cid] = _WORK

    def _step_event(
        self, step: StepView, p: StepStarted | StepRetrying | StepCompleted | StepFailed, at: float
    ) -> None:
        if isinstance(p, StepStarted):
            number = p.attempt or len(step.attempts) + 1
            if step.attempts and step.attempts[-1].outcome == "running":
                # taken over (its owner died): its end is not recorded (not this start, which
                # came after the wait for recovery), so it has no end and no duration
                step.attempts[-1].outcome = "abandoned"
            step.attempts.append(Attempt(number, at))
            step.status, step.starts, step.spent = "running", step.starts + 1, step.spent + 1
            step.owner, step.last_started_at = p.owner_message_id, at
            step.owner_lease = p.lease if p.owner_message_id is not None else None
            return
        attempt = step.attempts[-1] if step.attempts else None
        if (
            isinstance(p, StepFailed)
            and attempt is not None
            and attempt.outcome == "running"
            and (p.error or {}).get("code") in _REFUSALS
        ):
            # recorded without running the body (out of attempts at a recovery): the body
            # that was running died with no end recorded
            attempt.outcome = "abandoned"
            self.open.pop(step.cid, None)
            step.ended_at = at
            step.status, step.result, step.error = "failed", None, p.error
            return
        if attempt is None or attempt.outcome != "running":
            attempt = Attempt(len(step.attempts) + 1, at)  # its start is not in the log
            step.attempts.append(attempt)
        attempt.ended_at = at
        if isinstance(p, StepRetrying):
            attempt.outcome, attempt.error, attempt.retry_at = "retrying", p.error, p.retry_after
            attempt.schedule = p.schedule
            step.status, step.retry_after = "retrying", p.retry_after
            step.saw_retrying, step.owner, step.owner_lease = True, None, None
            step.spent = 0 if p.fresh else step.spent
            return
        self.open.pop(step.cid, None)
        step.ended_at = at
        if isinstance(p, StepCompleted):
            attempt.outcome, attempt.error = "completed", None
            step.status, step.result, step.error = "completed", p.result, None
        else:
            attempt.outcome, attempt.error = "failed", p.error
            step.status, step.result, step.error = "failed", None, p.error

    def _wait_created(self, cid: str, resume_at: float, at: float) -> None:
        self.open[cid] = _TIMER
        timed = self.hooks.get(timeout_of(cid))
        if timed is not None:
            timed.timeout_at = resume_at
            return
        wait = WaitView(cid, at, resume_at, decided_at=self.workflow_time())
        self.waits[cid] = wait  # a child's deadline too (the operator's waitingFor reads it)
        child = self.child_views.get(deadline_of(cid))
        if child is not None:  # the child's deadline: shown on the child, not as a sleep
            child.deadline_at, child.deadline_seconds = resume_at, wait.seconds
        else:
            self.order.append(("wait", cid))

    def _wait_completed(self, cid: str, at: float, early: bool = False) -> None:
        self.open.pop(cid, None)
        timed = self.hooks.get(timeout_of(cid))
        if timed is not None:
            if timed.status == "waiting":
                timed.status, timed.timed_out_early = "timed out", early
        elif cid in self.waits:
            self.waits[cid].completed_at = at
            self.waits[cid].early = early
            child = self.child_views.get(deadline_of(cid))
            if child is not None and child.ended_at is None:
                child.deadline_passed_at, child.deadline_early = at, early

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [s.to_json() for s in self.steps.values()],
            "hooks": [h.to_json() for h in self.hooks.values()],
            "waits": [
                w.to_json()
                for w in self.waits.values()
                if deadline_of(w.cid) not in self.child_views  # on its child instead
            ],
            "children": [c.to_json() for c in self.child_views.values()],
            "terminated": self.terminated,
        }


def fold(run_id: str, events: Iterable[Event]) -> RunView:
    """The run's whole log, folded."""
    view = RunView(run_id)
    for event in events:
        view.apply(event)
    return view
