"""The one projection of the log (``_core.projections``) and the pure planner
(``_core.planning``): every reader's answer comes from the same fold."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.runtime import flows, sdk_flows
from wayline._core.events import Event, EventType, NewEvent, RunStatus, apply_transition
from wayline._core.planning import (
    Arrival,
    CompleteWaits,
    DisposeHooks,
    Done,
    Suspend,
    decision_batch,
    dispatch_plan,
    next_move,
)
from wayline._core.projections import HookCreated, RunInfo, fold, fold_run, payload
from wayline._core.replay import Replay
from wayline.errors import CorruptLogError, EntityConflictError
from wayline.world import entries

T = EventType
RUN = "wf_" + "0" * 32


def _ev(seq: int, t: EventType, cid: str | None = None, **data: Any) -> Event:
    return Event(RUN, seq, t, cid, data, 1000.0 + seq)


def _log(*entries: tuple[Any, ...]) -> list[Event]:
    """Events from ``(type, correlation id, data)`` tuples (the last two optional)."""
    out = []
    for n, (t, *rest) in enumerate(entries, 1):
        cid = rest[0] if rest else None
        out.append(_ev(n, t, cid, **(rest[1] if len(rest) > 1 else {})))
    return out


def test_every_event_type_has_its_own_payload_class() -> None:
    classes = set()
    for n, t in enumerate(EventType, 1):
        p = payload(_ev(n, t, "x1"))
        assert dataclasses.is_dataclass(p), t
        classes.add(type(p))
    assert len(classes) == len(EventType)  # one class per event type, none shared


SAGA = _log(
    (T.RUN_CREATED, None, {"workflow": "saga", "input": {"args": [1]}, "revision": 2}),
    (T.RUN_STARTED, None, {"definition": {"identity": "abc"}}),
    (T.STEP_CREATED, "s1", {"stepName": "charge", "input": 1, "occurrence": 0}),
    (T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}),
    (T.STEP_STARTED, "s1", {"attempt": 2}),  # a take-over: attempt 1 died
    (T.STEP_RETRYING, "s1", {"error": {"message": "flaky"}, "retryAfter": 1010.0}),
    (T.STEP_STARTED, "s1", {"attempt": 3}),
    (T.STEP_COMPLETED, "s1", {"result": "r1"}),
    (T.HOOK_CREATED, "h1", {"token": "approve"}),
    (T.WAIT_CREATED, "h1.timeout", {"resumeAt": 2000.0}),
    (T.CHILD_CREATED, "c1", {"childRunId": "wf_kid", "workflow": "kid"}),
    (T.RUN_CANCEL_REQUESTED, None, {"reason": "stop"}),
    (T.HOOK_RECEIVED, "h1", {"payload": {"ok": True}}),
    (T.RUN_COMPENSATING, None, {"reason": "cancelled", "detail": "stop"}),
    (T.STEP_CREATED, "s1.c0", {"stepName": "charge:compensate", "compensates": "s1"}),
    (T.STEP_STARTED, "s1.c0", {"attempt": 1}),
    (T.STEP_FAILED, "s1.c0", {"error": {"message": "nope"}}),
    (T.RUN_COMPENSATION_STUCK, None, {"step": "charge", "error": {"message": "nope"}}),
    (T.RUN_COMPENSATION_RESUMED,),
)


def test_the_fold_answers_every_reader() -> None:
    view = fold(RUN, SAGA)
    step = view.steps["s1"]
    # the CLI timeline: attempts, with the take-over and the retry
    assert [a.outcome for a in step.attempts] == ["abandoned", "retrying", "completed"]
    assert (step.status, step.result, step.starts, step.retry_after) == (
        "completed",
        "r1",
        3,
        1010.0,
    )
    assert view.hooks["h1"].status == "received" and view.hooks["h1"].timeout_at == 2000.0
    assert view.status == "compensating" and view.compensation_resumes == 1
    assert [type(p).__name__ for _, p in view.phases] == [
        "RunCancelRequested",
        "RunCompensating",
        "RunCompensationStuck",
        "RunCompensationResumed",
    ]
    # the operator: forward steps created, completed and failed; compensations apart
    assert view.step_counts() == {"created": 1, "completed": 1, "failed": 0, "compensations": 1}
    # recovery: what is open, and whether the last event came from outside
    assert view.open_kinds() == {"hook", "timer", "child"}
    assert view.last_is_input  # run_compensation_resumed: a person's decision
    # the world's run view is the same fold
    assert view.run is not None and view.run.status is RunStatus.COMPENSATING
    assert view.run.attributes == {"revision": 2, "definition": {"identity": "abc"}}


def test_the_run_view_is_the_worlds_fold() -> None:
    info: RunInfo | None = None
    for event in SAGA[:8]:
        info = fold_run(info, event)
    assert info is not None
    assert (info.status, info.started_at, info.last_seq) == (RunStatus.RUNNING, 1002.0, 8)
    ended = fold_run(info, _ev(9, T.RUN_CANCELLED, reason="bye"))
    assert ended.status is RunStatus.CANCELLED and ended.error == {
        "code": "RUN_CANCELLED",
        "message": "bye",
    }
    assert fold(RUN, [*SAGA[:8], _ev(9, T.RUN_CANCELLED, reason="bye")]).run == ended


# --- a block over the run's own status ----------------------------------------------------------

_UNWINDING = (
    (T.RUN_CREATED, None, {"workflow": "w"}),
    (T.RUN_STARTED,),
    (T.RUN_CANCEL_REQUESTED, None, {"reason": "no"}),
    (T.RUN_COMPENSATING, None, {"reason": "cancelled"}),
)
_STUCK = (*_UNWINDING, (T.RUN_COMPENSATION_STUCK, None, {"step": "a", "error": {}}))


def _lifted(before: tuple[Any, ...], status: str | None) -> list[Event]:
    """``before``, then a block and its lift as a world records them over ``status``."""
    block = {"code": "REPLAY_DIVERGENCE", "message": "m"}
    lift = {}
    if status is not None:
        block, lift = {**block, "statusBefore": status}, {"status": status}
    return _log(*before, (T.RUN_BLOCKED, None, block), (T.RUN_UNBLOCKED, None, lift))


def _transitions(events: list[Event]) -> RunStatus | None:
    """The status the append rules (``apply_transition``) reach over ``events``, given the
    block in force as every world gives it."""
    status: RunStatus | None = None
    entities: dict[str, str | None] = {}
    block = None
    for ev in events:
        before = entities.get(ev.correlation_id) if ev.correlation_id else None
        status, after = apply_transition(
            status, before, NewEvent(ev.type, ev.correlation_id, ev.data), block
        )
        block = ev.data if ev.type is T.RUN_BLOCKED else block
        if ev.correlation_id:
            entities[ev.correlation_id] = after
    return status


@pytest.mark.parametrize(
    ("before", "status"),
    [
        (_UNWINDING, RunStatus.COMPENSATING),
        (_STUCK, RunStatus.COMPENSATION_STUCK),
        (_UNWINDING[:2], RunStatus.RUNNING),
        (_UNWINDING[:1], RunStatus.PENDING),
    ],
    ids=["compensating", "compensation_stuck", "running", "pending"],
)
def test_a_lifted_block_returns_the_run_to_the_status_it_was_put_over(
    before: tuple[Any, ...], status: RunStatus
) -> None:
    events = _lifted(before, str(status))
    blocked = fold(RUN, events[:-1]).run
    assert blocked is not None and blocked.status is RunStatus.BLOCKED
    lifted = fold_run(blocked, events[-1])
    assert lifted.status is status and lifted.error is None
    assert fold(RUN, events).run == lifted
    assert _transitions(events) is status
    entries.check_log(RUN, events, store="t")


def test_a_block_from_an_older_log_still_folds_and_is_lifted_to_running() -> None:
    """A log written before blocks recorded their status: its lift is accepted and, knowing
    no better, returns the run to running (as it always did)."""
    events = _lifted(_UNWINDING, None)
    assert fold(RUN, events).run.status is RunStatus.RUNNING  # type: ignore[union-attr]
    assert _transitions(events) is RunStatus.RUNNING
    entries.check_log(RUN, events, store="t")


def test_a_block_recorded_over_another_status_than_the_runs_is_refused() -> None:
    events = _log(*_UNWINDING, (T.RUN_BLOCKED, None, {"statusBefore": "running"}))
    with pytest.raises(CorruptLogError, match="not running as its block records"):
        entries.check_log(RUN, events, store="t")
    unreadable = _ev(5, T.RUN_UNBLOCKED, status="completed")
    with pytest.raises(ValueError, match="never lifted back to 'completed'"):
        payload(unreadable)


def _blocked(before: tuple[Any, ...], status: str | None, *after: tuple[Any, ...]) -> list[Event]:
    """``before``, a block as a world records it over ``status`` (None: as an older version
    did, recording nothing), then ``after``."""
    block: dict[str, Any] = {"code": "DEFINITION_MISMATCH", "message": "m"}
    if status is not None:
        block["statusBefore"] = status
    return _log(*before, (T.RUN_BLOCKED, None, block), *after)


@pytest.mark.parametrize(
    ("before", "under", "forged"),
    [
        (_UNWINDING, "compensating", "running"),
        (_STUCK, "compensation_stuck", "compensating"),
        (_UNWINDING[:2], "running", "compensating"),
        (_UNWINDING[:1], "pending", "running"),
    ],
    ids=["compensating", "compensation_stuck", "running", "pending"],
)
def test_a_lift_to_another_status_than_its_block_was_put_over_does_not_follow(
    before: tuple[Any, ...], under: str, forged: str
) -> None:
    """A lift that records a status returns the run to the one its block was put over: any
    other (written behind the world's back: a compensating run set running could complete
    without its reversals) fences the log, and is refused as an append."""
    events = _blocked(before, under, (T.RUN_UNBLOCKED, None, {"status": forged}))
    with pytest.raises(CorruptLogError, match=f"blocked over {under}; a lift returns it") as info:
        entries.check_log(RUN, events, store="t")
    assert info.value.seq == events[-1].seq
    with pytest.raises(EntityConflictError, match=f"not to {forged}"):
        _transitions(events)
    # the same over a block over the block (which keeps the first one's status)
    again = _blocked(before, under, (T.RUN_BLOCKED, None, {"statusBefore": under}))
    lift = len(again) + 1
    with pytest.raises(CorruptLogError, match="a lift returns it there"):
        entries.check_log(RUN, [*again, _ev(lift, T.RUN_UNBLOCKED, status=forged)], store="t")
    # the lift the world writes follows
    entries.check_log(RUN, [*again, _ev(lift, T.RUN_UNBLOCKED, status=under)], store="t")


def test_a_lift_that_records_no_status_is_an_older_versions_and_returns_to_running() -> None:
    """A version from before lifts recorded their status wrote ``run_unblocked`` with no
    data, also over a block a newer version wrote (a rolling upgrade): it still reads, and
    returns the run to running, as that version folded it (``unwind`` then declares the unwind
    again). A block from such a version records nothing, so any lift of it follows."""
    mixed = _blocked(_UNWINDING, "compensating", (T.RUN_UNBLOCKED,))
    entries.check_log(RUN, mixed, store="t")
    assert fold(RUN, mixed).run.status is RunStatus.RUNNING  # type: ignore[union-attr]
    assert _transitions(mixed) is RunStatus.RUNNING
    older = _blocked(_UNWINDING, None, (T.RUN_UNBLOCKED, None, {"status": "running"}))
    entries.check_log(RUN, older, store="t")
    assert _transitions(older) is RunStatus.RUNNING


def test_a_block_over_a_block_keeps_the_status_the_first_was_put_over() -> None:
    events = _blocked(
        _UNWINDING, "compensating", (T.RUN_BLOCKED, None, {"statusBefore": "running"})
    )
    with pytest.raises(CorruptLogError, match="blocked over compensating, not running as its"):
        entries.check_log(RUN, events, store="t")
    older = _blocked(_UNWINDING, "compensating", (T.RUN_BLOCKED, None, {"message": "o"}))
    entries.check_log(RUN, older, store="t")  # an older version's block over it records none


_END = (T.RUN_COMPLETED, None, {"output": 1})
_START = (T.RUN_STARTED,)


@pytest.mark.parametrize(
    ("before", "under", "ends", "starts"),
    [
        (_UNWINDING, "compensating", False, False),
        (_STUCK, "compensation_stuck", False, False),
        (_UNWINDING[:2], "running", True, False),
        (_UNWINDING[:1], "pending", True, True),
        (_UNWINDING, None, True, True),  # an older block: judged by the block alone
    ],
    ids=["compensating", "compensation_stuck", "running", "pending", "older-block"],
)
def test_a_blocked_run_ends_and_starts_as_the_status_under_its_block_allows(
    before: tuple[Any, ...], under: str | None, ends: bool, starts: bool
) -> None:
    """A block does not change what the run may do: a run blocked while it unwinds cannot
    complete, and only a run blocked before it started is started (a pending run blocked for
    a concurrency slot or a worker with its definition). Both were accepted of any blocked
    run; the world's appends now refuse them, and a stored log holding one (the version
    before wrote it) still reads."""
    for event, allowed, why in ((_END, ends, "cannot complete"), (_START, starts, "started")):
        events = _blocked(before, under, event)
        # a stored log reads either way: the version before appended both over any block
        entries.check_log(RUN, events, store="t")
        assert _transitions(events) is fold(RUN, events).run.status  # type: ignore[union-attr]
        block = events[-2].data
        if allowed:
            apply_transition(RunStatus.BLOCKED, None, NewEvent(event[0]), block, appending=True)
            continue
        with pytest.raises(EntityConflictError, match=f"{why} \\(it is blocked over {under}\\)"):
            apply_transition(RunStatus.BLOCKED, None, NewEvent(event[0]), block, appending=True)
        apply_transition(RunStatus.BLOCKED, None, NewEvent(event[0]))  # no block known: as before


def test_the_world_records_what_a_block_was_put_over() -> None:
    """``stamped``: a block records the run's status (a block over a block, the first
    one's), a lift the status it returns to; what a writer put there is replaced."""
    from wayline._core.events import stamped

    forged = NewEvent(T.RUN_BLOCKED, data={"message": "m", "statusBefore": "running"})
    first = stamped(forged, RunStatus.COMPENSATING, None)
    assert first.data == {"message": "m", "statusBefore": "compensating"}
    again = stamped(NewEvent(T.RUN_BLOCKED, data={"message": "n"}), RunStatus.BLOCKED, first.data)
    assert again.data == {"message": "n", "statusBefore": "compensating"}
    lift = stamped(
        NewEvent(T.RUN_UNBLOCKED, data={"status": "running"}), RunStatus.BLOCKED, again.data
    )
    assert lift.data == {"status": "compensating"}
    older = stamped(NewEvent(T.RUN_UNBLOCKED), RunStatus.BLOCKED, {"message": "m"})
    assert older.data == {"status": "running"}
    step = NewEvent(T.STEP_CREATED, "s1", {"stepName": "a"})
    assert stamped(step, RunStatus.BLOCKED, first.data) is step


def test_a_settled_waiting_run_is_idle_and_an_input_is_not() -> None:
    waiting = _log(
        (T.RUN_CREATED, None, {"workflow": "w"}),
        (T.RUN_STARTED,),
        (T.HOOK_CREATED, "h1", {"token": "t"}),
    )
    view = fold(RUN, waiting)
    assert view.open_kinds() == {"hook"} and not view.last_is_input
    view.apply(_ev(4, T.HOOK_RECEIVED, "h1", payload=1))
    assert view.last_is_input


# --- the planner ---------------------------------------------------------------------------------


def _replay(workflow: Any, events: list[Event]) -> Replay:
    r = Replay(workflow, RUN)
    r.feed(events)
    return r


def test_a_suspension_plans_lazy_and_eager_steps_in_one_batch() -> None:
    events = _log(
        (T.RUN_CREATED, None, {"workflow": "fan_out", "input": {"args": [3]}}), (T.RUN_STARTED,)
    )
    r = _replay(flows.fan_out, events)
    assert isinstance(next_move(r, closing=False, now=1.0), Suspend)
    batch = decision_batch(r, my_id="m1", max_inline=2, new_run_id=lambda: "wf_new")
    kinds = [(e.type, e.correlation_id) for e in batch.events]
    assert kinds == [
        (T.STEP_CREATED, "s1"),
        (T.STEP_STARTED, "s1"),
        (T.STEP_CREATED, "s2"),
        (T.STEP_STARTED, "s2"),
        (T.STEP_CREATED, "s3"),
    ]
    assert batch.events[1].data == {"attempt": 1, "ownerMessageId": "m1"}
    assert [rec.cid for rec in batch.lazy] == ["s1", "s2"]
    assert [(s.topic, s.key) for s in batch.sends] == [("step", f"{RUN}:s3")]


def test_the_dispatch_plans_owned_recovery_backstops_and_wakes() -> None:
    events = _log(
        (T.RUN_CREATED, None, {"workflow": "fan_out", "input": {"args": [3]}}),
        (T.RUN_STARTED,),
        (T.STEP_CREATED, "s1", {"stepName": "add", "input": {"args": [0, 0]}}),
        (T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "me"}),
        (T.STEP_CREATED, "s2", {"stepName": "add", "input": {"args": [1, 1]}}),
        (T.STEP_STARTED, "s2", {"attempt": 1, "ownerMessageId": "other"}),
        (T.STEP_CREATED, "s3", {"stepName": "add", "input": {"args": [2, 2]}}),
    )
    r = _replay(flows.fan_out, events)
    armed: set[str] = set()
    plan = dispatch_plan(
        r,
        Arrival("me", None, {}),
        now=1010.0,
        lease=860.0,
        ownership=True,
        skip=set(),
        armed=armed,
    )
    assert [rec.cid for rec in plan.owned] == ["s1"]
    assert [rec.cid for rec, _ in plan.backstops] == ["s2"]
    assert [(s.topic, s.payload.get("reason")) for s in plan.sends] == [
        ("flow", "backstop"),
        ("step", None),
    ]
    assert armed == {s.key for s in plan.sends}
    again = dispatch_plan(
        r, Arrival("me", None, {}), now=1010.0, lease=860.0, ownership=True, skip=set(), armed=armed
    )
    assert again.sends == []  # keys sent once by this delivery are not sent twice


def test_due_waits_and_the_end_are_moves() -> None:
    events = _log(
        (T.RUN_CREATED, None, {"workflow": "sleeper", "input": {"args": [5]}}),
        (T.RUN_STARTED,),
        (T.WAIT_CREATED, "w1", {"resumeAt": 1008.0}),
    )
    r = _replay(flows.sleeper, events)
    assert isinstance(next_move(r, closing=False, now=1000.0), Suspend)
    wake = dispatch_plan(
        r, Arrival("me", None, {}), now=1000.0, lease=860.0, ownership=True, skip=set(), armed=set()
    )
    assert [(s.topic, s.key, s.delay) for s in wake.sends] == [("flow", f"{RUN}:w1", 8.0)]
    early = dispatch_plan(  # the wait's own wake, early by this worker's clock: a successor key
        r,
        Arrival("me", None, {"waitId": "w1"}),
        now=1000.0,
        lease=860.0,
        ownership=True,
        skip=set(),
        armed=set(),
    )
    assert [s.key for s in early.sends] == [f"{RUN}:w1:after:me"]
    due = next_move(r, closing=False, now=1009.0)
    assert isinstance(due, CompleteWaits) and [e.correlation_id for e in due.events] == ["w1"]
    r.feed([_ev(4, T.RUN_COMPLETED, output=5)])
    assert isinstance(next_move(r, closing=True, now=0.0), Done)


def test_the_sdk_event_data_is_read_by_the_one_projection() -> None:
    schedule = {"attempt": 1, "delay": 2.0, "source": "policy", "policy": {"maxAttempts": 3}}
    shape = {"required": ["by"], "fields": {"by": ["string"]}}
    view = fold(
        RUN,
        _log(
            (T.RUN_CREATED, None, {"workflow": "w", "input": None}),
            (T.RUN_STARTED,),
            (T.STEP_CREATED, "s1", {"stepName": "flaky", "input": None}),
            (T.STEP_STARTED, "s1", {"attempt": 1}),
            (T.STEP_RETRYING, "s1", {"error": {"message": "x"}, "retryAfter": 1.0, **schedule}),
            (T.HOOK_CREATED, "h1", {"token": "t", "type": "m:Go", "shape": shape, "metadata": [1]}),
            (T.WAIT_CREATED, "h1.timeout", {"resumeAt": 3000.0}),
            (T.WAIT_CREATED, "w1", {"resumeAt": 2000.0}),
            (T.WAIT_CREATED, "w2", {"resumeAt": 2500.0}),
            (T.WAIT_COMPLETED, "w1", {"resumeAt": 2000.0, "early": True}),
        ),
    )
    out = view.to_json()
    assert out["steps"][0]["attempts"][0]["schedule"] == schedule
    assert (out["hooks"][0]["type"], out["hooks"][0]["metadata"]) == ("m:Go", [1])
    assert [(w["id"], w["early"]) for w in out["waits"]] == [("w1", True), ("w2", False)]
    assert view.pending_timers() == {"h1.timeout": 3000.0, "w2": 2500.0}
    created = payload(_ev(1, T.HOOK_CREATED, "h1", token="t", shape=shape))
    assert created == HookCreated("t", None, shape, None)


def test_a_disposed_hook_is_written_alone_before_the_next_batch() -> None:
    events = _log(
        (T.RUN_CREATED, None, {"workflow": "untyped_dispose", "input": {"args": ["tok"]}}),
        (T.RUN_STARTED,),
        (T.HOOK_CREATED, "h1", {"token": "tok", "metadata": {"why": "legacy"}}),
        (T.HOOK_RECEIVED, "h1", {"payload": 1}),
    )
    r = _replay(sdk_flows.untyped_dispose, events)
    move = next_move(r, closing=False, now=1.0)
    assert isinstance(move, DisposeHooks)
    assert [(e.type, e.correlation_id) for e in move.events] == [(T.HOOK_DISPOSED, "h1")]
    r.feed([_ev(5, T.HOOK_DISPOSED, "h1")])
    assert isinstance(next_move(r, closing=False, now=1.0), Suspend)
    batch = decision_batch(r, my_id="m1", max_inline=0, new_run_id=lambda: "wf_new")
    assert [(e.type, e.correlation_id, e.data) for e in batch.events] == [
        (T.HOOK_CREATED, "h2", {"token": "tok"})
    ]


def test_an_unwind_over_a_block_does_not_show_the_blocks_error() -> None:
    """A blocked run that unwinds (a cancel, its block left in place) showed the block's
    ``error`` for as long as it compensated, and after it ended without a failure."""
    for before in (_UNWINDING[:3], _UNWINDING[:2]):
        events = _blocked(before, "running", (T.RUN_COMPENSATING, None, {"reason": "cancelled"}))
        assert _transitions(events) is RunStatus.COMPENSATING
        run = fold(RUN, events).run
        assert (run.status, run.error) == (RunStatus.COMPENSATING, None)
        ended = fold(RUN, [*events, _ev(len(events) + 1, T.RUN_CANCELLED, reason="no")]).run
        assert ended.error == {"code": "RUN_CANCELLED", "message": "no"}


# --- an attempt whose end is not recorded ----------------------------------------------------


def test_an_abandoned_attempt_has_no_end_and_no_duration() -> None:
    """A take-over (the owner SIGKILLed mid-body, its step started again later) records no
    end for the first attempt: its ``endedAt`` is unknown, not the next attempt's start (the
    wait for recovery is not run time)."""
    events = [
        Event(RUN, 1, T.RUN_CREATED, None, {"workflow": "w"}, 100.0),
        Event(RUN, 2, T.RUN_STARTED, None, {}, 100.1),
        Event(RUN, 3, T.STEP_CREATED, "s1", {"stepName": "pay"}, 100.2),
        Event(RUN, 4, T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}, 100.2),
        Event(RUN, 5, T.STEP_STARTED, "s1", {"attempt": 2, "ownerMessageId": "m1"}, 127.2),
        Event(RUN, 6, T.STEP_COMPLETED, "s1", {"result": 1}, 130.2),
    ]
    step = fold(RUN, events).steps["s1"]
    first, second = step.attempts
    assert (first.outcome, first.started_at, first.ended_at) == ("abandoned", 100.2, None)
    assert (second.outcome, second.started_at, second.ended_at) == ("completed", 127.2, 130.2)
    attempts = fold(RUN, events).to_json()["steps"][0]["attempts"]
    assert attempts[0]["endedAt"] is None and attempts[0]["startedAt"] == 100.2
    assert attempts[0]["outcome"] == "abandoned"


def test_a_step_given_up_after_its_body_died_leaves_the_attempt_abandoned() -> None:
    """Owned recovery of a step out of attempts records it failed (``MAX_ATTEMPTS_EXCEEDED``)
    without running it: the attempt that died was not failed at that moment, it was
    abandoned, with no end recorded."""
    events = [
        Event(RUN, 1, T.RUN_CREATED, None, {"workflow": "w"}, 100.0),
        Event(RUN, 2, T.RUN_STARTED, None, {}, 100.1),
        Event(RUN, 3, T.STEP_CREATED, "s1", {"stepName": "pay"}, 100.2),
        Event(RUN, 4, T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}, 100.2),
        Event(
            RUN,
            5,
            T.STEP_FAILED,
            "s1",
            {"error": {"name": "FatalError", "code": "MAX_ATTEMPTS_EXCEEDED", "message": "x"}},
            108.95,
        ),
    ]
    step = fold(RUN, events).steps["s1"]
    [only] = step.attempts
    assert (only.outcome, only.ended_at) == ("abandoned", None)
    assert step.status == "failed" and step.ended_at == 108.95
    assert step.error is not None and step.error["code"] == "MAX_ATTEMPTS_EXCEEDED"


def test_a_hook_timed_out_early_and_a_childs_deadline_are_not_sleeps() -> None:
    events = _log(
        (T.RUN_CREATED, None, {"workflow": "w"}),
        (T.RUN_STARTED,),
        (T.HOOK_CREATED, "h1", {"token": "t"}),
        (T.WAIT_CREATED, "h1.timeout", {"resumeAt": 5000.0}),
        (T.WAIT_COMPLETED, "h1.timeout", {"early": True}),
        (T.CHILD_CREATED, "c1", {"childRunId": "wf_kid", "workflow": "kid", "deadline": 1007.0}),
        (T.WAIT_CREATED, "c1.deadline", {"resumeAt": 1007.0}),
        (T.WAIT_COMPLETED, "c1.deadline", {}),
    )
    view = fold(RUN, events)
    hook = view.hooks["h1"]
    assert (hook.status, hook.timed_out_early) == ("timed out", True)
    assert ("wait", "c1.deadline") not in view.order
    child = view.child_views["c1"]
    assert (child.deadline_at, child.deadline_passed_at) == (1007.0, 1008.0)
    assert "c1.deadline" in view.waits  # the operator's waitingFor reads it there
