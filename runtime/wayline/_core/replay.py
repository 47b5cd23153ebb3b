"""Deterministic replay: a workflow function driven by its event log.

The workflow coroutine runs on the runtime's own tiny scheduler, never on asyncio: it may only
await Wayline's futures (steps, sleeps, hooks, ``gather``/``race``), which are settled only by
events fed in log order, with the scheduler run to quiescence after each event. So the state
after feeding events 1..k is the same in every process, whether the coroutine has been alive
since event 1 (an invocation continuing after its own inline steps) or was rebuilt from the log
(a fresh replay after a crash). That is what lets one invocation keep its in-memory replay
across steps instead of replaying from the first event each time.

Calls made by the workflow get per-kind slot ids (``s1``, ``h1``, ``w1``) in call order; a call
sequence that disagrees with the log is a :class:`ReplayDivergenceError`, never guessed around.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, assert_never

from ..durations import Duration, to_seconds
from ..errors import (
    ChildFailedError,
    ChildTimeoutError,
    FatalError,
    HookTimeout,
    ReplayDivergenceError,
    StepFailedError,
    WaylineError,
    WorkflowDeterminismError,
)
from . import limits, ordering, search_attributes
from .current import outside_any_task, replay_var
from .definitions import StepDefinition, WorkflowDefinition
from .dispatch import StepState
from .events import Event, EventType, NewEvent
from .futures import WFuture, closing
from .projections import (
    AttributesSet,
    ChildCompleted,
    ChildCreated,
    HistoryLarge,
    HookCreated,
    HookDisposed,
    HookReceived,
    PatchMarked,
    RunBlocked,
    RunCancelled,
    RunCancelRequested,
    RunCompensating,
    RunCompensationAbandoned,
    RunCompensationResumed,
    RunCompensationStuck,
    RunCompleted,
    RunContinuedAsNew,
    RunCreated,
    RunDebounced,
    RunFailed,
    RunPaused,
    RunRedriven,
    RunStarted,
    RunUnblocked,
    RunUnpaused,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
    payload,
)
from .redrives import redriven_failures
from .serde import decode, encode

LATEST_WAIT_END = 253402300799.0
"""9999-12-31T23:59:59Z: the latest time ``datetime`` holds, so the latest a wait may end."""

_TIMED = (EventType.WAIT_CREATED, EventType.HOOK_CREATED, EventType.CHILD_CREATED)


@dataclass(eq=False, slots=True)
class StepRecord:
    cid: str
    name: str
    definition: StepDefinition[..., Any] | None
    input: Any
    occurrence: int
    future: WFuture[Any]
    created: bool = False
    terminal: bool = False
    owner: str | None = None
    owner_lease: float | None = None
    last_started_at: float | None = None
    saw_retrying: bool = False
    starts: int = 0
    spent: int = 0
    """The starts of its current retry budget (``StepView.spent``)."""
    queued_start: bool = False
    """The latest event is a bare (queue-owned) ``step_started``: a step worker runs the body,
    held by its step message, with no lease in the log to read."""
    outcome: str | None = None
    """"completed" or "failed" once terminal."""
    result: Any = None
    """The stored (JSON) result, for compensation's ``forward_result``."""
    compensates: str | None = None
    """For a compensation step: the forward step's correlation id."""
    epoch: int = 0
    """For a compensation step: how many times the unwind had been resumed when it began."""

    def state(self) -> StepState:
        return StepState(
            self.owner, self.last_started_at, self.saw_retrying, self.terminal, self.owner_lease
        )


@dataclass(eq=False, slots=True)
class WaitRecord:
    cid: str
    resume_at: float
    future: WFuture[None]
    created: bool = False
    completed: bool = False
    hook: HookRecord | None = None
    """Set for a hook's timeout wait."""
    child: ChildRecord | None = None
    """Set for a child's deadline."""

    @property
    def relevant(self) -> bool:
        if self.completed:
            return False
        if self.hook is not None:
            return not self.hook.payloads
        return self.child is None or (self.child.created and not self.child.done)


@dataclass(eq=False, slots=True)
class ChildRecord:
    cid: str
    workflow: WorkflowDefinition[..., Any]
    input: Any
    future: WFuture[Any]
    timeout: float | None = None
    created: bool = False
    run_id: str | None = None
    """The child's run id, chosen when the parent claims it (``child_created``)."""
    business_id: str | None = None
    """``ChildOptions(id=...)``: the engine names the run after it when it claims the child."""
    priority: int | None = None
    """``ChildOptions(priority=...)``: the child's, instead of its parent's."""
    done: bool = False
    deadline: WaitRecord | None = None


@dataclass(eq=False, slots=True)
class HookRecord:
    cid: str
    token: str
    hint: Any
    first: WFuture[Any]
    created: bool = False
    payloads: list[Any] = field(default_factory=list)
    waiters: dict[int, WFuture[Any]] = field(default_factory=dict)
    timeout: WaitRecord | None = None
    metadata: Any = None
    """``metadata=`` at creation, recorded in ``hook_created`` for people and tools."""
    type_name: str | None = None
    """A typed hook's payload class (``module:Qualname``), recorded so ``resume`` can refuse
    a payload that does not validate."""
    shape: Any = None
    """A typed hook's required fields and their JSON types (``hooks.shape``)."""
    disposed: bool = False


@dataclass(slots=True)
class Ending:
    """How the run is ending besides returning: a cancel request, and the saga unwind."""

    cancel_requested: bool = False
    cancel_reason: str = ""
    phase: str = "running"
    """``compensating`` or ``stuck`` once the unwind began."""
    why: dict[str, Any] = field(default_factory=dict)
    """The ``run_compensating`` data: why the run is unwinding, and the original error."""
    resumes: int = 0
    """How many times a person resumed a stuck unwind (the compensation epoch)."""
    abandoned: bool = False
    paused: bool = False
    """Paused (``run_paused`` not yet followed by ``run_unpaused``): nothing new starts."""

    @property
    def unwinding(self) -> bool:
        """The run must unwind (or is unwinding) rather than continue its workflow."""
        return self.phase != "running" or self.cancel_requested


class NeedsStamp(BaseException):
    """Raised through the workflow when it reads workflow time while the event it resumed on
    is provisional (not yet written, so its world timestamp is unknown). The replay is dead from
    then on: the handler writes the event and rebuilds the replay from the log. A BaseException
    so a workflow's ``except Exception`` does not swallow it."""


class _Fiber:
    __slots__ = ("coro", "future")

    def __init__(self, coro: Coroutine[Any, Any, Any], future: WFuture[Any]) -> None:
        self.coro = coro
        self.future = future


def _outcome_read(fut: asyncio.Future[Any]) -> None:
    """Take the outcome of an asyncio future a failed workflow awaited, so that nothing logs
    it as never retrieved."""
    if not fut.cancelled():
        fut.exception()


def _explained(err: BaseException) -> BaseException:
    """The workflow's error, or for the asyncio call that refused to run outside a task
    (``asyncio.timeout``, ``wait_for``; see ``outside_any_task``) one that says what to use."""
    if not isinstance(err, RuntimeError):
        return err
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or tb.tb_frame.f_globals.get("__name__") != "asyncio.timeouts":
        return err
    problem = WorkflowDeterminismError(
        "a workflow used asyncio.timeout (or asyncio.wait_for), which is not durable: a "
        "workflow is stepped by its replay, not by an asyncio task (a step's own deadline: "
        "@wayline.step(timeout=...); a wait with a deadline: wayline.race(..., "
        "wayline.sleep(...)), create_hook(..., timeout=...), "
        "child_with(ChildOptions(timeout=...), ...))"
    )
    problem.__cause__ = err
    return problem


class Replay:
    """One run's workflow function, fed by its events. Not thread-safe; one per delivery."""

    def __init__(self, workflow: WorkflowDefinition[..., Any], run_id: str) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self._now = 0.0
        self._now_known = True
        self.needs_stamp = False
        """Set when the workflow read time during a provisional event (see NeedsStamp)."""
        self.provisional: list[NewEvent] = []
        """Events fed ahead of the log (a step's completion carried by the next write)."""
        self.durable_seq = 0
        """The last seq the log is known to have while ``provisional`` is non-empty."""
        self.last_seq = 0
        self.last_event: Event | None = None  # the last fed from the log, not provisional
        self.input: Any = None
        self.queue: str | None = None
        """The queue the run was started on (``queue=``): its children's too."""
        self.namespace: str | None = None
        """The namespace the run was started in (``Client(namespace=)``): its children's too."""
        self.ordering = ordering.DEFAULT
        """How the run's work is ordered (``StartOptions(priority=, fairness_key=)``): its
        children's too."""
        self.rng = random.Random(run_id)
        self._token_rng = random.Random(f"{run_id}:hook-tokens")
        self.steps: dict[str, StepRecord] = {}
        self.hooks: dict[str, HookRecord] = {}
        self.waits: dict[str, WaitRecord] = {}
        self._open_waits: dict[str, WaitRecord] = {}
        """The waits not completed, for ``pending_waits`` (all ``waits`` grow with the run)."""
        self.open_steps: dict[str, StepRecord] = {}
        """Created and not terminal."""
        self.compensations: dict[str, list[StepRecord]] = {}
        """Compensation attempts by forward correlation id, in order."""
        # Calls the workflow made that the log does not have yet, in call order.
        self.new_steps: dict[str, StepRecord] = {}
        self.new_hooks: dict[str, HookRecord] = {}
        self.new_waits: dict[str, WaitRecord] = {}
        self.new_disposals: dict[str, HookRecord] = {}
        self.children: dict[str, ChildRecord] = {}
        self.new_children: dict[str, ChildRecord] = {}
        self._counters = {"s": 0, "h": 0, "w": 0, "c": 0}
        self._occurrences: dict[str, int] = {}
        self._ready: deque[tuple[_Fiber, WFuture[Any] | None]] = deque()
        self._fibers: list[_Fiber] = []
        self.closed = False
        """Set by :meth:`close`: the replay is being dropped; its workflow awaits no more."""
        self._order = 0
        self.root: WFuture[Any] | None = None
        self.terminal: Event | None = None
        self.ending = Ending()
        """Cancel requests and the saga unwind, as the log has them."""
        self.parent: Any = None
        """``{"runId", "cid"}`` when this run is a child."""
        self._patches: dict[str, bool] = {}
        self._marked: set[str] = set()
        """Patch ids the log records, including events fed later in the same ``feed`` call."""
        self._log_end = 0
        """The last seq known to be in the log: a call made before it replays old history."""
        self._created: set[str] = set()
        """Ids of the waits, hooks and children the log records (as ``_marked``)."""
        self.new_patches: dict[str, NewEvent] = {}
        """Patch markers the log does not have yet: written with the next decision batch."""
        self.history_warned = False
        """The log records its ``history_large`` warning (see ``_engine.history_limits``)."""
        self.created: Mapping[str, Any] = {}
        """Everything the run's ``run_created`` records besides its workflow and input."""
        self.search: dict[str, Any] = {}
        """The run's search attributes (stored form), as of the calls made so far."""
        self._attributes_logged: set[int] = set()
        """Seqs of the ``attributes_set`` events the log holds (as ``_marked``)."""
        self._attribute_calls = 0
        self._redriven: set[int] = set()
        """Seqs of the ``step_failed`` events a later ``run_redriven`` gave a fresh budget."""
        self.new_attributes: list[NewEvent] = []
        """``set_attributes`` calls the log does not have yet: written, in call order, with
        the next decision batch or the run's end."""
        self.started_at: float | None = None
        """World time of ``run_started``; None while it is provisional."""
        self.delivery_attempt = 1
        """The queue delivery driving this replay (``workflow_info().attempt``)."""

    # --- feeding the log ---------------------------------------------------------------------
    def feed(self, events: list[Event]) -> None:
        if events:
            self._log_end = max(self._log_end, events[-1].seq)
            self._redriven |= redriven_failures(events)
            for e in events:
                if e.type is EventType.PATCH_MARKED:
                    marked = payload(e)
                    assert isinstance(marked, PatchMarked)
                    self._marked.add(marked.patch_id)
                elif e.type is EventType.ATTRIBUTES_SET:
                    self._attributes_logged.add(e.seq)
                elif e.type in _TIMED and e.correlation_id is not None:
                    self._created.add(e.correlation_id)
        for event in events:
            if event.seq <= self.last_seq:
                continue
            if event.seq != self.last_seq + 1:
                raise WaylineError(
                    f"replay of {self.run_id} got seq {event.seq} after {self.last_seq}"
                )
            self.last_seq = event.seq
            self.last_event = event
            self._now, self._now_known = event.created_at, True
            self._apply(event)
            self._run()

    @property
    def now(self) -> float:
        """Workflow time: the world timestamp of the last event fed."""
        if not self._now_known:
            self.needs_stamp = True
            raise NeedsStamp("workflow time read during a provisional event")
        return self._now

    def feed_provisional(self, new: NewEvent) -> None:
        """Feed an event the log does not have yet, as the next seq. The caller writes it
        (alone, or at the head of the next batch, fenced on ``durable_seq``) before anything
        that depends on it leaves the process, and rebuilds the replay if the log disagrees."""
        if not self.provisional:
            self.durable_seq = self.last_seq
        self.provisional.append(new)
        self.last_seq += 1
        self._now_known = False
        self._apply(Event(self.run_id, self.last_seq, new.type, new.correlation_id, new.data, 0.0))
        self._run()

    def settle_provisional(self, created_at: float) -> None:
        """The provisional events are written, at the seqs they were fed with."""
        self.provisional.clear()
        self._now, self._now_known = created_at, True
        if self.started_at is None and self.root is not None:
            self.started_at = created_at

    def _apply(self, event: Event) -> None:
        cid = event.correlation_id or ""
        match p := payload(event):
            # a step's events come first: a match tries its cases in order, and most of a
            # run's events are its steps' (issue #39, item 2); no two cases' classes overlap
            case StepCreated(compensates=str()):
                self._compensation_created(cid, p)
            case StepCreated():
                self._step_created(cid, p)
            case StepStarted():
                self._step_started(self._step(cid, event.type), p, event.created_at)
            case StepRetrying():
                self._step_retrying(self._step(cid, event.type), p.fresh)
            case StepFailed() if event.seq in self._redriven:
                # a later redrive gave the step a fresh budget: the workflow never sees this
                # failure, as if the step had been retried with a new budget at once
                self._step_retrying(self._step(cid, event.type), fresh=True)
            case StepCompleted() | StepFailed():
                self._step_ended(self._step(cid, event.type), p)
            case RunCreated():
                self._run_created(p)
            case RunStarted():
                self.started_at = event.created_at if self._now_known else None
                self._start_root()
            case RunCompleted() | RunFailed() | RunCancelled() | RunContinuedAsNew():
                self.terminal = event
            case RunRedriven():
                self.terminal = None  # its failed step, never settled here, runs again
            case RunCancelRequested(reason):
                self.ending.cancel_requested = True
                self.ending.cancel_reason = reason or "cancelled"
            case RunCompensating(unwind):
                self.ending.phase, self.ending.why = "compensating", dict(unwind)
            case RunCompensationStuck():
                self.ending.phase = "stuck"
            case RunCompensationResumed():
                self.ending.phase = "compensating"
                self.ending.resumes += 1
            case RunCompensationAbandoned():
                self.ending.abandoned = True
            case RunBlocked() | RunUnblocked():
                pass  # nothing the workflow sees
            case RunPaused() | RunUnpaused():
                self.ending.paused = isinstance(p, RunPaused)
            case HistoryLarge():
                self.history_warned = True
            case PatchMarked(patch_id):
                self._marked.add(patch_id)
                self.new_patches.pop(patch_id, None)
            case AttributesSet(values):
                self._attributes_set(event.seq, values)
            case RunDebounced(replaced):
                self.input = replaced  # the last start's, before the run began
            case HookDisposed():
                self._hook_disposed(cid)
            case HookCreated():
                hook = self.hooks.get(cid)
                if hook is None:
                    self._diverge(f"hook {cid}", self._call_at("h", cid))
                hook.created = True
                self.new_hooks.pop(cid, None)
            case HookReceived(value):
                hook = self.hooks.get(cid)
                if hook is None:
                    self._diverge(f"hook payload for {cid}", "no such hook")
                self._deliver(hook, value)
            case WaitCreated(resume_at):
                self._wait_created(cid, resume_at)
            case WaitCompleted():
                self._wait_completed(cid)
            case ChildCreated():
                self._child_created(cid, p)
            case ChildCompleted():
                self._child_completed(cid, p)
            case unknown:
                assert_never(unknown)

    def _hook_disposed(self, cid: str) -> None:
        disposed = self.hooks.get(cid)
        if disposed is not None:
            disposed.disposed = True
            self.new_disposals.pop(cid, None)

    def _wait_created(self, cid: str, resume_at: float | None) -> None:
        wait = self.waits.get(cid)
        if wait is None:
            self._diverge(f"sleep {cid}", self._call_at("w", cid))
        wait.created = True
        self.new_waits.pop(cid, None)
        if resume_at is not None:
            wait.resume_at = resume_at

    @staticmethod
    def _step_retrying(rec: StepRecord, fresh: bool) -> None:
        rec.spent = 0 if fresh else rec.spent
        rec.saw_retrying = True  # queue-owned from now on, for good
        rec.owner, rec.owner_lease, rec.queued_start = None, None, False

    @staticmethod
    def _step_started(rec: StepRecord, p: StepStarted, at: float) -> None:
        rec.starts += 1
        rec.spent += 1
        rec.owner = p.owner_message_id  # latest start wins; a bare start clears
        rec.owner_lease = p.lease if p.owner_message_id is not None else None
        rec.queued_start = p.owner_message_id is None
        rec.last_started_at = at

    def _step_created(self, cid: str, p: StepCreated) -> None:
        rec = self.steps.get(cid)
        if rec is None:
            self._diverge(f"step {p.step_name!r} ({cid})", self._call_at("s", cid))
        elif rec.name != p.step_name:
            self._diverge(f"step {p.step_name!r} ({cid})", f"step {rec.name!r} ({cid})")
        rec.created = True
        self.new_steps.pop(cid, None)
        self.open_steps[cid] = rec

    def _step_ended(self, rec: StepRecord, p: StepCompleted | StepFailed) -> None:
        self._close_step(rec)
        if isinstance(p, StepFailed):
            rec.outcome, rec.result = "failed", p.error
            if rec.compensates is None:
                failure = StepFailedError(rec.name, p.error or {})
                rec.future.set_exception(failure, self._tick())
            return
        rec.outcome, rec.result = "completed", p.result
        if rec.compensates is not None:
            return
        hint = rec.definition.signature.return_hint if rec.definition else None
        try:
            value = decode(p.result, hint, what=f"result of step {rec.name!r}")
        except FatalError as err:
            rec.future.set_exception(err, self._tick())
        else:
            rec.future.set_result(value, self._tick())

    def _wait_completed(self, cid: str) -> None:
        wait = self.waits.get(cid)
        if wait is None:
            self._diverge(f"wake of {cid}", "no such sleep")
        wait.completed = True
        self._open_waits.pop(cid, None)
        if wait.child is not None:
            if not wait.child.done:
                wait.child.future.set_exception(
                    ChildTimeoutError(
                        f"child run {wait.child.run_id} of {wait.child.workflow.name!r} "
                        "passed its deadline (it keeps running)"
                    ),
                    self._tick(),
                )
        elif wait.hook is None:
            wait.future.set_result(None, self._tick())
        elif not wait.hook.payloads:
            wait.hook.first.set_exception(
                HookTimeout(f"hook {wait.hook.token!r} timed out"), self._tick()
            )
            # it holds its token no more: a late payload is refused, not taken and dropped,
            # and a new hook may hold the token (written with the timeout, see planning)
            self.dispose_hook(wait.hook)

    def _child_created(self, cid: str, p: ChildCreated) -> None:
        child = self.children.get(cid)
        if child is None:
            self._diverge(f"child run of {p.workflow!r} ({cid})", self._call_at("c", cid))
        if child.workflow.name != p.workflow:
            self._diverge(f"child run of {p.workflow!r} ({cid})", f"child {child.workflow.name!r}")
        child.created, child.run_id = True, p.child_run_id
        self.new_children.pop(cid, None)
        if child.deadline is not None and p.deadline is not None:
            child.deadline.resume_at = p.deadline

    def _child_completed(self, cid: str, p: ChildCompleted) -> None:
        child = self.children.get(cid)
        if child is None or not child.created:
            self._diverge(f"end of child {cid}", "no such child")
        child.done = True
        if p.status == "completed":
            hint = child.workflow.signature.return_hint
            try:
                value = decode(p.output, hint, what=f"result of child {child.run_id}")
            except FatalError as err:
                child.future.set_exception(err, self._tick())
            else:
                child.future.set_result(value, self._tick())
        else:
            child.future.set_exception(
                ChildFailedError(str(child.run_id), p.status, p.error or {}), self._tick()
            )

    def _compensation_created(self, cid: str, p: StepCreated) -> None:
        forward = self.steps.get(str(p.compensates))
        if forward is None or forward.definition is None:
            self._diverge(f"compensation of {p.compensates}", "no such step")
        rec = StepRecord(
            cid,
            p.step_name,
            forward.definition.compensation,
            p.input,
            p.occurrence,
            WFuture(f"compensation {cid}"),
            created=True,
            compensates=forward.cid,
            epoch=p.epoch,
        )
        rec.result = p.forward_result
        self.steps[cid] = rec
        self.compensations.setdefault(forward.cid, []).append(rec)

    def compensation_plan(self) -> list[StepRecord]:
        """Forward steps to reverse, latest first: those that completed, and those whose
        outcome is unknown (created, not terminal), that declare a compensation."""
        plan = [
            rec
            for rec in self.steps.values()
            if rec.compensates is None
            and rec.created
            and rec.definition is not None
            and rec.definition.compensation is not None
            and rec.outcome != "failed"
        ]
        return plan[::-1]

    def next_compensation(self) -> tuple[StepRecord, StepRecord | None] | None:
        """The next (forward, compensation) pair the unwind must act on; compensation None
        means it is to be started now. None when the unwind is complete."""
        for forward in self.compensation_plan():
            attempts = self.compensations.get(forward.cid, [])
            latest = attempts[-1] if attempts else None
            if latest is None and forward.starts == 0 and self.ending.phase != "running":
                # never started, and now never will: once the unwind is recorded no forward
                # body starts (a queued start is fenced on the log), so nothing is to undo
                continue
            if latest is None:
                return forward, None
            if latest.outcome == "completed":
                continue
            if latest.outcome == "failed" and latest.epoch < self.ending.resumes:
                return forward, None  # a person resumed the unwind: try it again
            return forward, latest
        return None

    def untried_compensations(self, stuck: str | None = None) -> list[StepRecord]:
        """The forward steps whose reversal the unwind has yet to run, latest first, besides
        ``stuck`` (the forward step whose reversal parks the run): what a person who abandons
        the unwind gives up without it being tried. The same rules as ``next_compensation``:
        a forward step that never started has nothing to undo, a reversal that completed is
        done, and one that failed before a resume would be tried again."""
        out = []
        for forward in self.compensation_plan():
            attempts = self.compensations.get(forward.cid, [])
            latest = attempts[-1] if attempts else None
            if forward.cid == stuck or (latest is None and forward.starts == 0):
                continue
            if latest is None or latest.outcome != "completed":
                out.append(forward)
        return out

    def _step(self, cid: str, t: EventType) -> StepRecord:
        rec = self.steps.get(cid)
        if rec is None or not rec.created:
            self._diverge(f"{t} for {cid}", "no such step")
        return rec

    def _close_step(self, rec: StepRecord) -> None:
        rec.terminal = True
        rec.owner, rec.queued_start = None, False
        self.open_steps.pop(rec.cid, None)

    def _deliver(self, hook: HookRecord, raw: Any) -> None:
        try:
            value = decode(raw, hook.hint, what=f"payload of hook {hook.token!r}")
        except FatalError as err:
            if not hook.payloads:
                hook.payloads.append(None)
                hook.first.set_exception(err, self._tick())
            return
        index = len(hook.payloads)
        hook.payloads.append(value)
        if index == 0:
            hook.first.set_result(value, self._tick())
        elif index in hook.waiters:
            hook.waiters.pop(index).set_result(value, self._tick())

    def _tick(self) -> int:
        self._order += 1
        return self._order

    def _call_at(self, kind: str, cid: str) -> str:
        """What the workflow made where the log has ``cid``: the call it made instead (one
        the log does not have), or that it made none."""
        for rec in self.new_steps.values():
            return f"step {rec.name!r} ({rec.cid})"
        for hook in self.new_hooks.values():
            return f"hook {hook.cid}"
        for wait in self.new_waits.values():
            return f"sleep {wait.cid}"
        for child in self.new_children.values():
            return f"child run of {child.workflow.name!r} ({child.cid})"
        if self.finished:
            return "the workflow's end"
        made = self._counters[kind]
        return f"no such call (the workflow has made {made} {kind}-calls so far)"

    def _diverge(self, expected: str, actual: str) -> NoReturn:
        raise ReplayDivergenceError(
            f"replay divergence at seq {self.last_seq}, expected {expected}, got {actual}",
            run_id=self.run_id,
            seq=self.last_seq,
            expected=expected,
            got=actual,
            hint="the workflow code changed under a running run, or it is not deterministic "
            "(use wayline.now/random/uuid4 and steps for side effects; wayline.patched for "
            "changes that must reach live runs)",
        )

    # --- the scheduler -----------------------------------------------------------------------
    def _start_root(self) -> None:
        if self.root is not None:
            return
        try:
            args, kwargs = self.workflow.signature.decode_args(
                self.input, what=f"input of workflow {self.workflow.name!r}"
            )
            coro = self.workflow.fn(*args, **kwargs)
        except BaseException as err:
            self.root = WFuture("workflow")
            self.root.set_exception(err)
            return
        self.root = self.spawn(coro)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> WFuture[Any]:
        future: WFuture[Any] = WFuture("task")
        fiber = _Fiber(coro, future)
        self._fibers.append(fiber)
        self._ready.append((fiber, None))
        return future

    def close(self) -> None:
        """Close the workflow's coroutines that still wait, as the replay is dropped (the
        delivery ends with the run suspended, or the replay is rebuilt).

        Left to the garbage collector, each would be closed wherever collection happens to
        run, its ``finally`` blocks and ``async with`` exits with it: a step called there
        found no replay and ran its body as a plain call, a side effect no log recorded, once
        for every replay dropped while the run waited. Closed here, under this replay, such a
        call is recorded nowhere (nothing is written from a closed replay) and awaiting it
        ends the block (see ``futures.closing``)."""
        if self.closed:
            return
        self.closed = True
        token = replay_var.set(self)
        try:
            with outside_any_task(), closing():
                for fiber in self._closing_order():
                    if fiber.future.done():
                        continue
                    try:
                        fiber.coro.close()
                    except (Exception, NeedsStamp):
                        # its ``finally`` raised, or read time during a provisional event the
                        # replay is dropped with: nothing to report or write for a replay
                        # being dropped (a live replay runs that code again)
                        continue
        finally:
            replay_var.reset(token)

    def _closing_order(self) -> Iterator[_Fiber]:
        """The fibers to close, the latest (innermost) first, then those their ``finally``
        blocks spawned meanwhile (a ``gather`` of coroutines there), never left unstarted for
        the collector, which warns that they were never awaited."""
        seen = 0
        while seen < len(self._fibers):
            batch, seen = self._fibers[seen:], len(self._fibers)
            yield from reversed(batch)

    def _run(self) -> None:
        ready = self._ready
        if not ready or self.needs_stamp:
            # most events a replay is fed wake no fiber (a step's start, a wait's creation):
            # nothing to step, so no context to switch into. Each switch asks for the running
            # loop, which is a getpid system call in CPython (issue #39, item 2)
            return
        token = replay_var.set(self)
        try:
            with outside_any_task():
                while ready and not self.needs_stamp:
                    fiber, resumed = ready.popleft()
                    self._step_fiber(fiber, resumed)
        finally:
            replay_var.reset(token)

    def _step_fiber(self, fiber: _Fiber, resumed: WFuture[Any] | None) -> None:
        try:
            yielded = fiber.coro.send(None)
        except StopIteration as stop:
            fiber.future.set_result(stop.value, self._tick())
            return
        except BaseException as err:  # the workflow raised: its task fails
            fiber.future.set_exception(_explained(err), self._tick())
            return
        if isinstance(yielded, WFuture):
            if yielded.done():
                self._ready.append((fiber, yielded))
            else:
                ready = self._ready

                def wake(f: WFuture[Any], fb: _Fiber = fiber) -> None:
                    ready.append((fb, f))

                yielded.add_done_callback(wake)
        elif yielded is None:  # a bare cooperative yield
            self._ready.append((fiber, None))
        else:
            what = type(yielded).__qualname__
            if asyncio.isfuture(yielded):  # asyncio.gather / ensure_future in the workflow
                yielded.add_done_callback(_outcome_read)  # asyncio logs nothing at collection
                yielded.cancel()  # tasks not started yet never run
            problem = WorkflowDeterminismError(
                f"a workflow awaited {what}, which is not durable; workflows may only await "
                "wayline steps, wayline.sleep, hooks, wayline.gather/race and child runs "
                "(asyncio.sleep -> wayline.sleep; I/O belongs in a @wayline.step)"
            )
            fiber.coro.close()
            fiber.future.set_exception(problem, self._tick())

    # --- outcome -----------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.root is not None and self.root.done()

    def _run_created(self, p: RunCreated) -> None:
        self.input = p.input
        self.created = p.attributes
        queue = p.attributes.get("queue")
        self.queue = queue if isinstance(queue, str) and queue else None
        namespace = p.attributes.get("namespace")
        self.namespace = namespace if isinstance(namespace, str) and namespace else None
        self.ordering = ordering.of_record(p.attributes)
        self.search = search_attributes.stored(p.attributes)

    def _attributes_set(self, seq: int, values: Mapping[str, Any]) -> None:
        self._attributes_logged.add(seq)
        if self.new_attributes and self.new_attributes[0].data.get("set") == values:
            self.new_attributes.pop(0)  # ours, written (the calls are in log order)
        else:
            self.search = search_attributes.merged(self.search, values)

    # --- calls made by the workflow (through wayline.* functions) ------------------------------
    def _next(self, kind: str) -> str:
        self._counters[kind] += 1
        return f"{kind}{self._counters[kind]}"

    def call_step(
        self, definition: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> WFuture[Any]:
        name = definition.name
        stored = definition.signature.encode_args(args, kwargs, what=f"step {name!r}")
        limits.check(stored, "step_args", f"the arguments of step {name!r}")
        cid = self._next("s")
        occurrence = self._occurrences.get(name, 0)
        self._occurrences[name] = occurrence + 1
        rec = StepRecord(cid, name, definition, stored, occurrence, WFuture(f"step {name}"))
        self.steps[cid] = rec
        self.new_steps[cid] = rec
        return rec.future

    def patched(self, patch_id: str) -> bool:
        """Temporal's ``workflow.patched``: True when the log records the patch, or when the
        workflow reaches this call past the end of the log (new history: the marker is then
        written with the next decision batch); False when it replays history written before
        the patch. The first answer for an id holds for the rest of the run."""
        if not isinstance(patch_id, str) or not patch_id:
            raise ValueError(f"a patch id must be a non-empty string, got {patch_id!r}")
        known = self._patches.get(patch_id)
        if known is not None:
            return known
        if patch_id in self._marked:
            value = True
        elif self.last_seq < self._log_end:
            value = False
        else:
            value = True
            self.new_patches[patch_id] = NewEvent(
                EventType.PATCH_MARKED, data={"patchId": patch_id}
            )
        self._patches[patch_id] = value
        return value

    def set_attributes(self, values: Mapping[str, Any]) -> None:
        """``wayline.set_attributes``: the n-th call of a run is the log's n-th
        ``attributes_set``. A call the log holds (history replayed) writes nothing again; a
        call past it is written with the next decision batch or the run's end. Checked
        before anything is recorded, so a bad value fails the workflow at the call."""
        update = search_attributes.encode(values, unset=True)
        after = search_attributes.checked_count(search_attributes.merged(self.search, update))
        self._attribute_calls += 1
        if self._attribute_calls <= len(self._attributes_logged):
            return  # replayed: the log has it, and feeding it merged it already
        self.search = after
        self.new_attributes.append(NewEvent(EventType.ATTRIBUTES_SET, data={"set": update}))

    def sleep(self, duration: Duration) -> WFuture[None]:
        seconds = to_seconds(duration)
        cid = self._next("w")
        wait = WaitRecord(cid, self._wait_end(seconds, "a sleep", cid), WFuture(f"sleep {cid}"))
        self.waits[cid] = self._open_waits[cid] = wait
        self.new_waits[cid] = wait
        return wait.future

    def _wait_end(self, seconds: float, what: str, cid: str) -> float:
        """When a wait of ``seconds`` from now ends. Refused (``ValueError``, as a negative
        duration is) when that is not a time: ``inf`` (``"inf"``, ``1e400``) or past the year
        9999, which no reader of the log (``runs show``, a WorkflowRun's status) can print
        and no JSON reader but Python's can parse. A wait with no end is a hook without
        ``timeout``. One the log records (wait, hook or child ``cid``) is not refused: an
        older version recorded it (its logged ``resumeAt`` holds), and the run goes on."""
        end = self.now + seconds
        if not end <= LATEST_WAIT_END and cid not in self._created:
            raise ValueError(
                f"{what} of {seconds!r} s would end after the year 9999 "
                "(for a wait with no end, use a hook without a timeout)"
            )
        return end

    def create_hook(
        self,
        token: str | None,
        timeout: Duration | None,
        hint: Any,
        metadata: Any = None,
        type_name: str | None = None,
    ) -> HookRecord:
        """A new hook, written with the run's next batch (the sdk wraps it in a handle)."""
        cid = self._next("h")
        if token is None:
            token = f"hk_{self._token_rng.getrandbits(96):024x}"
        elif not isinstance(token, str) or not token:
            raise ValueError(f"a hook token must be a non-empty string, got {token!r}")
        hook = HookRecord(cid, token, hint, WFuture(f"hook {token}"))
        if metadata is not None:
            hook.metadata = encode(metadata, what=f"metadata of hook {token!r}")
            limits.check(hook.metadata, "hook_payload", f"the metadata of hook {token!r}")
        hook.type_name = type_name
        if timeout is not None:
            end = self._wait_end(to_seconds(timeout), "a hook timeout", cid)
            wait = WaitRecord(f"{cid}.timeout", end, WFuture(cid))
            wait.hook = hook
            hook.timeout = wait
            self.waits[wait.cid] = self._open_waits[wait.cid] = wait
        self.hooks[cid] = hook
        self.new_hooks[cid] = hook
        return hook

    def dispose_hook(self, hook: HookRecord) -> None:
        if not hook.disposed and hook.created:
            self.new_disposals[hook.cid] = hook
        elif not hook.created:  # never written: nothing holds its token yet
            hook.disposed = True
            self.new_hooks.pop(hook.cid, None)

    def start_child(
        self,
        workflow: WorkflowDefinition[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        timeout: Duration | None,
        business_id: str | None = None,
        priority: int | None = None,
    ) -> WFuture[Any]:
        what = f"child workflow {workflow.name!r}"
        stored = workflow.signature.encode_args(args, kwargs, what=what)
        cid = self._next("c")
        if cid not in self._created:
            # as Client.start: an input the child cannot take raises here, in the parent
            # (catchable), and no child run is written. A child the log records already
            # (written before this check existed) replays as it was recorded.
            workflow.check_input(stored, what=what)
        child = ChildRecord(cid, workflow, stored, WFuture(f"child {workflow.name}"))
        child.business_id = business_id
        child.priority = priority
        if timeout is not None:
            child.timeout = to_seconds(timeout)
            end = self._wait_end(child.timeout, "a child timeout", cid)
            wait = WaitRecord(f"{cid}.deadline", end, WFuture(cid))
            wait.child = child
            child.deadline = wait
            self.waits[wait.cid] = self._open_waits[wait.cid] = wait
        self.children[cid] = child
        self.new_children[cid] = child
        return child.future

    def pending_children(self) -> list[ChildRecord]:
        return [c for c in self.children.values() if c.created and not c.done]

    def pending_waits(self) -> list[WaitRecord]:
        return [w for w in self._open_waits.values() if w.created and w.relevant]
