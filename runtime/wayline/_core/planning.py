"""What one delivery does next with a run, decided from the replay alone (pure).

The handler's loop (``_engine.handler``) asks :func:`next_move` what to do with the replay as
it stands, and for a suspension, :func:`decision_batch` (the new hooks, waits, children and
steps, written as one atomic batch) and then :func:`dispatch_plan` (the decision table for
every created, non-terminal step, and the wake-ups for the waits the run is blocked on); for a
batch the world refused as a failure of the run, :func:`fail_move` (end the run at once, or
begin its unwind); and during the saga unwind, :func:`unwind_move`. These read the replay and
return data; nothing here writes, enqueues or runs a body, so every path through a suspension
is a value a test can look at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .continuation import ContinueAsNew
from .dispatch import FLOW_TOPIC, STEP_TOPIC, Action, Decision, decide, step_dispatch_key
from .events import EventType, NewEvent
from .messages import Backstop, StepStart, WaitDue
from .projections import Reversal, StepView
from .replay import ChildRecord, HookRecord, Replay, StepRecord, WaitRecord
from .serde import error_to_dict

# --- the next move --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The run has ended: nothing more to do."""


@dataclass(frozen=True, slots=True)
class HandBack:
    """The worker is closing: write what is provisional and hand the run back unfinished."""


@dataclass(frozen=True, slots=True)
class Paused:
    """The run is paused: nothing new is decided, started or completed (a body already
    running records its result; a wait that fell due completes on the unpause's wake)."""


@dataclass(frozen=True, slots=True)
class Unwind:
    """The run is being cancelled, or failed with something to reverse: the saga unwind."""


@dataclass(frozen=True, slots=True)
class Finish:
    """The workflow function returned or raised with nothing to reverse: record its end."""


@dataclass(frozen=True, slots=True)
class CompleteWaits:
    """Waits that are due by this worker's clock: write their completions and go on."""

    events: list[NewEvent]


@dataclass(frozen=True, slots=True)
class DisposeHooks:
    """Hooks the workflow disposed of: write their disposals alone, before the next batch (a
    world frees a token when its hook's disposal is stored, and a new hook in that batch may
    claim the same token)."""

    events: list[NewEvent]


@dataclass(frozen=True, slots=True)
class Suspend:
    """The workflow is suspended on work it asked for: plan the batch and the dispatch."""

    now: float


Move = Done | HandBack | Paused | Unwind | Finish | CompleteWaits | DisposeHooks | Suspend


def next_move(replay: Replay, *, closing: bool, now: float) -> Move:
    if replay.terminal is not None:
        return Done()
    if closing:
        return HandBack()
    if replay.ending.paused:
        return Paused()
    if replay.ending.unwinding:
        return Unwind()
    if replay.finished:
        root = replay.root
        failed = root is not None and root.failed()
        if root is not None and isinstance(root.exception(), ContinueAsNew):
            return Finish()  # an end the workflow asked for: nothing to reverse
        if failed and (replay.compensation_plan() or replay.pending_children()):
            return Unwind()
        return Finish()
    due = [w for w in replay.pending_waits() if w.resume_at <= now]
    if due:
        return CompleteWaits(_completions(due))
    if replay.new_disposals:
        return DisposeHooks(
            [NewEvent(EventType.HOOK_DISPOSED, h.cid) for h in replay.new_disposals.values()]
        )
    return Suspend(now)


def _completions(due: list[WaitRecord]) -> list[NewEvent]:
    """Each due wait's completion; a hook that times out before its first payload is disposed
    in the same write, so no payload can reach it between its timeout and its disposal."""
    events: list[NewEvent] = []
    for w in due:
        events.append(NewEvent(EventType.WAIT_COMPLETED, w.cid, {"resumeAt": w.resume_at}))
        if w.hook is not None and w.hook.created and not w.hook.disposed:
            events.append(NewEvent(EventType.HOOK_DISPOSED, w.hook.cid))
    return events


# --- what leaves the process ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """One queue message: ``enqueue(topic, payload, idempotency_key=key, delay_seconds=delay)``."""

    topic: str
    payload: dict[str, Any]
    key: str
    delay: float = 0.0


def step_payload(run_id: str, rec: StepRecord) -> dict[str, Any]:
    """A queued step's message."""
    return StepStart(run_id, rec.cid, rec.name).to_wire()


def step_send(run_id: str, rec: StepRecord, key: str | None = None, delay: float = 0.0) -> Send:
    return Send(
        STEP_TOPIC, step_payload(run_id, rec), key or step_dispatch_key(run_id, rec.cid), delay
    )


def backstop_send(run_id: str, key: str, delay: float) -> Send:
    return Send(FLOW_TOPIC, Backstop(run_id, key).to_wire(), key, delay)


# --- a suspension: the decision batch --------------------------------------------------------


@dataclass(slots=True)
class DecisionBatch:
    events: list[NewEvent] = field(default_factory=list)
    lazy: list[StepRecord] = field(default_factory=list)
    """New steps created *and* started (stamped with this delivery) in the batch: run inline."""
    sends: list[Send] = field(default_factory=list)
    """Eager new steps: created, then queued as their own step messages."""
    children: list[tuple[ChildRecord, str]] = field(default_factory=list)
    """New children and the run ids chosen for them (claimed in the batch, started after)."""


def hook_created(hook: HookRecord) -> NewEvent:
    """A new hook's ``hook_created``: its token, and for a typed hook its class and shape, and
    the ``metadata`` it was created with (read back by ``projections.HookCreated``)."""
    data: dict[str, Any] = {"token": hook.token}
    if hook.type_name is not None:
        data["type"] = hook.type_name
    if hook.shape is not None:
        data["shape"] = hook.shape
    if hook.metadata is not None:
        data["metadata"] = hook.metadata
    return NewEvent(EventType.HOOK_CREATED, hook.cid, data)


def _wait_created(wait: WaitRecord) -> NewEvent:
    return NewEvent(EventType.WAIT_CREATED, wait.cid, {"resumeAt": wait.resume_at})


def decision_batch(
    replay: Replay,
    *,
    my_id: str,
    max_inline: int,
    new_run_id: Callable[[], str],
    lease: float | None = None,
) -> DecisionBatch:
    """The suspension's new hooks, waits, children and steps as one atomic batch. The first
    ``max_inline`` new steps are lazy inline: created and started in the same write, stamped
    with ``my_id`` (seed 000, first invariant); the rest, and every step with ``timeout=``
    (queue-owned from the start), are eager. ``wayline.patched`` markers come first."""
    batch = DecisionBatch()
    batch.events += replay.new_patches.values()
    batch.events += replay.new_attributes
    for hook in replay.new_hooks.values():
        batch.events.append(hook_created(hook))
        if hook.timeout is not None:
            batch.events.append(_wait_created(hook.timeout))
    for child in replay.new_children.values():
        run_id = new_run_id()
        batch.children.append((child, run_id))
        data: dict[str, Any] = {"childRunId": run_id, "workflow": child.workflow.name}
        if child.deadline is not None:
            data["deadline"] = child.deadline.resume_at
        batch.events.append(NewEvent(EventType.CHILD_CREATED, child.cid, data))
        if child.deadline is not None:
            batch.events.append(_wait_created(child.deadline))
    batch.events += [_wait_created(wait) for wait in replay.new_waits.values()]
    for rec in replay.new_steps.values():
        data = {"stepName": rec.name, "input": rec.input, "occurrence": rec.occurrence}
        batch.events.append(NewEvent(EventType.STEP_CREATED, rec.cid, data))
        queued = rec.definition is not None and rec.definition.queued_only
        if len(batch.lazy) < max_inline and not queued:
            stamp = owner_stamp(1, my_id, lease)
            batch.events.append(NewEvent(EventType.STEP_STARTED, rec.cid, stamp))
            batch.lazy.append(rec)
        else:
            batch.sends.append(step_send(replay.run_id, rec))
    return batch


def owner_stamp(attempt: int, my_id: str, lease: float | None) -> dict[str, Any]:
    """An owned ``step_started``'s data: the owner's message id and the lease it runs under
    (a reader waits for the longer of its own and this one: ``dispatch.lease_remaining``)."""
    stamp: dict[str, Any] = {"attempt": attempt, "ownerMessageId": my_id}
    if lease is not None:
        stamp["lease"] = lease
    return stamp


HELD_DELAY_MIN = 2.0
"""Seconds before the first return of a delivery handed back because it owns a step its run's
pause holds: the step runs this soon after an unpause that follows a short pause. The default
of ``Settings.held_delay_seconds`` (``WAYLINE_HELD_DELAY_SECONDS``), which a worker passes to
:func:`held_delay`; a worker reads each return's log, so 2 s keeps a paused run's reads few."""
HELD_DELAY_FLOOR = 0.1
"""The least ``Settings.held_delay_seconds`` may be. A worker that cannot read the pause's age
(its clock behind the one that stamped the pause, as a NATS worker's is before its first
append measures the skew) hands the delivery back for the held delay every time, reading the
run's log and writing to the world each time: at 1 ms that was 200 returns a second and a
quarter of a core per held delivery (bench/held_handbacks.py); at 0.1 s it is at most 10."""
HELD_DELAY_MAX = 30.0
"""The longest hand-back of such a delivery: a run paused for hours reads its log once every
30 s for it (no hot loop), and its step runs at most 30 s after the unpause."""


def holds_a_step(my_id: str, steps: Iterable[StepRecord | StepView]) -> bool:
    """Whether a forward step still owned by the stamp of the delivery ``my_id`` waits in a
    paused run. The world refused its re-stamp over the pause (or the delivery came back to a
    run paused already), so only this delivery can run it: the unpause's wake reads the stamp
    as a live owner's and arms a backstop for the rest of the lease (up to 900 s). Such a
    delivery is handed back, never acknowledged, and runs owned recovery after the unpause;
    no second body can start from it, as a live owner still holds its own delivery."""
    return any(
        s.owner == my_id and not s.saw_retrying and not s.terminal and s.compensates is None
        for s in steps
    )


HELD_GROWTH = 1.25
"""How much each earlier held hand-back of a delivery lengthens its next one: a quarter, as a
quarter of the pause's age grows when every hand-back waits that quarter."""


def held_delay(
    paused_at: float | None, now: float, least: float = HELD_DELAY_MIN, held_handbacks: int = 0
) -> float:
    """The hand-back of a delivery that :func:`holds_a_step`: a quarter of the pause's age, or
    ``least`` (the worker's ``held_delay_seconds``, ``HELD_DELAY_MIN`` by default) grown by a
    quarter for each of the delivery's held hand-backs in a row before it
    (``Delivery.held_handbacks``), whichever is longer, at most ``HELD_DELAY_MAX``, so a long
    pause costs few reads. The count keeps it growing on a worker whose clock is behind the
    one that stamped the pause (it reads the age as 0); it leaves out hand-backs for other
    reasons (a slot's wait), which would make the run resume late after a short pause.
    ``least`` is at most the cap (the settings refuse more), so a run paused for hours still
    reads its log every 30 s."""
    age = 0.0 if paused_at is None else max(0.0, now - paused_at)
    grown = least * HELD_GROWTH ** min(max(0, held_handbacks), 64)  # 64: past the cap from 0.1
    return min(HELD_DELAY_MAX, max(grown, age / 4))


# --- a suspension: the dispatch --------------------------------------------------------------


@dataclass(slots=True)
class Dispatch:
    owned: list[StepRecord] = field(default_factory=list)
    """Owned recovery: steps this delivery owns whose body died with a previous invocation."""
    sends: list[Send] = field(default_factory=list)
    backstops: list[tuple[StepRecord, Send]] = field(default_factory=list)
    """Steps owned by another live delivery, and the backstop wake armed for each."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """What the delivery being handled is, as far as the dispatch cares."""

    message_id: str
    backstop_key: str | None
    payload: Mapping[str, Any]


def dispatch_plan(
    replay: Replay,
    arrival: Arrival,
    *,
    now: float,
    lease: float,
    ownership: bool,
    skip: set[str],
    armed: set[str],
) -> Dispatch:
    """The decision table (``dispatch.decide``) for every created, non-terminal step not in
    ``skip`` (this batch's lazy steps), and a wake for each wait the run is blocked on. Keys
    in ``armed`` were sent already by this delivery; the keys planned here are added to it."""
    run_id, plan = replay.run_id, Dispatch()

    def send(message: Send) -> None:
        armed.add(message.key)
        plan.sends.append(message)

    for rec in replay.open_steps.values():
        if rec.cid in skip:
            continue
        d = _table(replay, rec, arrival, now, lease, ownership)
        if d.idempotency_key in armed:
            continue
        if d.action is Action.EXECUTE_OWNED:
            plan.owned.append(rec)
        elif d.action is Action.ARM_BACKSTOP:
            wake = backstop_send(run_id, d.idempotency_key, d.delay_seconds)
            plan.backstops.append((rec, wake))
            send(wake)
        else:
            send(step_send(run_id, rec, d.idempotency_key))
    for wait in replay.pending_waits():
        key = f"{run_id}:{wait.cid}"
        if arrival.payload.get("waitId") == wait.cid:
            # This delivery is that wait's own wake, arriving before the wait is due by this
            # worker's clock (behind the world's). Its key is still held while it is in
            # flight, so a re-arm under it would be dropped: use a successor.
            key = f"{key}:after:{arrival.message_id}"
        if key not in armed:
            payload = WaitDue(run_id, wait.cid).to_wire()
            send(Send(FLOW_TOPIC, payload, key, max(0.0, wait.resume_at - now)))
    return plan


# --- a failure the world found: end at once, or unwind first ---------------------------------


@dataclass(frozen=True, slots=True)
class RunFailure:
    """A failure of the run that the world found, not the workflow's code: the decision batch
    was refused whole (``HOOK_CONFLICT``: a new hook's token is held by another run)."""

    code: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    """More fields of the recorded error (``token``, ``holderRunId``)."""

    def error(self) -> dict[str, Any]:
        """The error the run records, as a framework error (``WaylineError``) with its code."""
        return {"name": "WaylineError", "code": self.code, "message": self.message, **self.fields}


@dataclass(frozen=True, slots=True)
class FailNow:
    """The failed run ends at once, with nothing reversed: ``events`` are the attributes the
    workflow set since its last batch (that batch was refused, and no batch of the workflow's
    own comes after) and the run's ``run_failed``, written in that order in one append."""

    failure: RunFailure
    events: list[NewEvent]


@dataclass(frozen=True, slots=True)
class BeginFailedUnwind:
    """The failed run has completed steps to reverse or children still running: ``events``
    are the attributes the workflow set since its last batch, then ``run_compensating`` with
    the failure, and the unwind's own moves (:func:`unwind_move`) follow."""

    failure: RunFailure
    events: list[NewEvent]


FailMove = FailNow | BeginFailedUnwind | Done


def fail_move(replay: Replay, failure: RunFailure) -> FailMove:
    """What a failure the world found does to the run, from the replay alone: a run that has
    ended already is left as it is (``Done``); one with a step to reverse or a child still
    running begins its unwind, as a failure of its workflow does (:func:`_begin`); any other
    ends at once, and so does a run whose unwind had begun (it is not begun twice)."""
    if replay.terminal is not None:
        return Done()
    error = failure.error()
    if replay.ending.phase == "running" and (
        replay.compensation_plan() or replay.pending_children()
    ):
        begun = NewEvent(EventType.RUN_COMPENSATING, data={"reason": "failed", "error": error})
        return BeginFailedUnwind(failure, [*replay.new_attributes, begun])
    failed = NewEvent(EventType.RUN_FAILED, data={"error": error})
    return FailNow(failure, [*replay.new_attributes, failed])


# --- the saga unwind: one move at a time ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginUnwind:
    """Record why the run unwinds (``run_compensating``), after the attributes the workflow
    set since its last batch: no batch of the workflow's own comes after it."""

    events: list[NewEvent]


@dataclass(frozen=True, slots=True)
class EndUnwind:
    """Nothing (more) to reverse, or a person abandoned the unwind: the run's terminal event."""

    why: Mapping[str, Any]
    abandoned: bool = False


@dataclass(frozen=True, slots=True)
class CancelChildren:
    """A cancel reaches the children still running; each one's end wakes the run. With
    ``then`` (an abandoned park), the run ends right after, without waiting for them."""

    children: list[ChildRecord]
    why: str
    then: EndUnwind | None = None


@dataclass(frozen=True, slots=True)
class Park:
    """The run waits for a person: a reversal failed for good (``failed``, the forward step),
    or a child outlived its deadline and still runs (``failed`` None)."""

    stuck: dict[str, Any]
    failed: StepRecord | None = None


@dataclass(frozen=True, slots=True)
class RunCompensation:
    """Run one reversal's body here: a new one (``events`` create it and stamp its start with
    this delivery), or owned recovery of one this delivery's message started."""

    forward: StepRecord
    cid: str
    attempt: int
    recovery: bool
    events: list[NewEvent] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WaitElsewhere:
    """The step the unwind waits for runs elsewhere (a live owner, or its queue message):
    send its backstop wake or its step message, and leave the run to it."""

    send: Send
    backstop: bool


@dataclass(frozen=True, slots=True)
class WaitForPerson:
    """The unwind is parked, or waits for a child: nothing to do until a person or a child's
    end wakes the run."""


UnwindMove = (
    BeginUnwind
    | EndUnwind
    | CancelChildren
    | Park
    | RunCompensation
    | WaitElsewhere
    | WaitForPerson
)


def unwind_move(
    replay: Replay, arrival: Arrival, *, now: float, lease: float, ownership: bool
) -> UnwindMove:
    """The saga unwind's next move (seed 004, "Compensations"), from the replay alone: every
    forward step that completed or whose outcome is unknown is reversed, latest first, each
    reversal a durable step with its own key; one that failed parks the run for a person."""
    ending = replay.ending
    if ending.phase == "running":
        return _begin(replay)
    running = replay.pending_children()
    if running and ending.cancel_requested:
        why = f"its parent run {replay.run_id} was cancelled: {ending.cancel_reason}"
        # the person who abandoned the unwind does not wait for the children either: one
        # that never ends (its own unwind parked, its log fenced) held the parent for ever
        then = EndUnwind(ending.why, abandoned=True) if _abandoned(replay) else None
        return CancelChildren(running, why, then)
    if running and ending.phase == "compensating":
        # A child that outlived its deadline still runs: the parent waits, visibly, until
        # it settles and a person resumes or abandons the unwind (seed 004).
        child = running[0]
        error = {"code": "CHILD_RUNNING", "message": f"child run {child.run_id} is still running"}
        stuck = {"step": f"child {child.run_id}", "stepId": child.cid, "error": error}
        return Park({**stuck, "notRun": not_run(replay, None)})
    if ending.phase == "stuck":
        return EndUnwind(ending.why, abandoned=True) if ending.abandoned else WaitForPerson()
    nxt = replay.next_compensation()
    if nxt is None:
        return EndUnwind(ending.why)
    forward, comp = nxt
    if comp is None:
        waiting = (
            None
            if forward.terminal
            else _elsewhere(replay, forward, arrival, now, lease, ownership)
        )
        return waiting or _create_compensation(replay, forward, arrival.message_id, lease)
    if comp.terminal:
        error = comp.result if isinstance(comp.result, dict) else {}
        stuck = {"step": forward.name, "stepId": forward.cid, "error": error}
        return Park({**stuck, "notRun": not_run(replay, forward.cid)}, failed=forward)
    d = _table(replay, comp, arrival, now, lease, ownership)
    if d.action is Action.ARM_BACKSTOP:
        return WaitElsewhere(backstop_send(replay.run_id, d.idempotency_key, d.delay_seconds), True)
    if d.action is Action.ENQUEUE:
        return WaitElsewhere(step_send(replay.run_id, comp, d.idempotency_key), False)
    return RunCompensation(forward, comp.cid, comp.starts + 1, True)


def _abandoned(replay: Replay) -> bool:
    return replay.ending.phase == "stuck" and replay.ending.abandoned


def _begin(replay: Replay) -> BeginUnwind | EndUnwind:
    ending = replay.ending
    why: dict[str, Any]
    if ending.cancel_requested:
        why = {"reason": "cancelled", "detail": ending.cancel_reason}
    else:
        failure = replay.root.exception() if replay.root is not None else None
        assert failure is not None
        why = {"reason": "failed", "error": error_to_dict(failure)}
    if not replay.compensation_plan() and not replay.pending_children():
        return EndUnwind(why)
    return BeginUnwind([*replay.new_attributes, NewEvent(EventType.RUN_COMPENSATING, data=why)])


def _table(
    replay: Replay, rec: StepRecord, arrival: Arrival, now: float, lease: float, ownership: bool
) -> Decision:
    """The decision table (``dispatch.decide``) for ``rec`` as this delivery sees it."""
    return decide(
        rec.state(),
        run_id=replay.run_id,
        correlation_id=rec.cid,
        my_message_id=arrival.message_id,
        now=now,
        lease=lease,
        ownership_enabled=ownership,
        arriving_backstop_key=arrival.backstop_key,
    )


def _elsewhere(
    replay: Replay, forward: StepRecord, arrival: Arrival, now: float, lease: float, ownership: bool
) -> WaitElsewhere | None:
    """Seed 000's table holds for the unwind too: a forward body that another live delivery
    owns is still running, so it is waited for (its backstop armed; its owner unwinds once it
    has completed). Its outcome is unknown only once the owner is provably dead: the lease
    expired, or this delivery is the owner's own redelivery. A queue-owned start (a bare
    ``step_started``) has no lease but runs all the same: its step message holds it, and its
    outcome continues the run (the table's enqueue, deduplicated against that message)."""
    d = _table(replay, forward, arrival, now, lease, ownership)
    if d.action is Action.ARM_BACKSTOP:
        return WaitElsewhere(backstop_send(replay.run_id, d.idempotency_key, d.delay_seconds), True)
    if forward.queued_start:
        return WaitElsewhere(step_send(replay.run_id, forward, d.idempotency_key), False)
    return None


def _create_compensation(
    replay: Replay, forward: StepRecord, my_id: str, lease: float
) -> RunCompensation:
    """Create the compensation of ``forward``, started (stamped) by this delivery."""
    assert forward.definition is not None and forward.definition.compensation
    epoch = replay.ending.resumes
    cid = f"{forward.cid}.c{epoch}"
    data = {
        "stepName": forward.definition.compensation.name,
        "input": forward.input,
        "occurrence": forward.occurrence,
        "compensates": forward.cid,
        "epoch": epoch,
        "forwardResult": forward.result if forward.outcome == "completed" else None,
    }
    created = [
        NewEvent(EventType.STEP_CREATED, cid, data),
        NewEvent(EventType.STEP_STARTED, cid, owner_stamp(1, my_id, lease)),
    ]
    return RunCompensation(forward, cid, 1, False, created)


def not_run(replay: Replay, stuck: str | None) -> list[dict[str, str]]:
    """The reversals a park leaves untried, recorded on it: only a worker has the definitions
    that say which forward steps compensate, so a person's abandon (a client with no code)
    copies this list into its own event and shows what it gives up."""
    out = []
    for forward in replay.untried_compensations(stuck):
        assert forward.definition is not None and forward.definition.compensation is not None
        reversal = Reversal(forward.definition.compensation.name, forward.name, forward.cid)
        out.append(reversal.to_json())
    return out
