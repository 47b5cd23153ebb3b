"""The saga unwind as pure planner moves (``planning.unwind_move``), over golden histories.

Each test feeds a golden history (``tests/golden/decisions.jsonl``), sometimes with the unwind's
own events added after it as a worker or a person would write them, to a fresh replay and asks
the planner for the unwind's next move. Nothing here writes or runs a body: the move is a value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.golden import workflows
from wayline._core.events import Event, EventType
from wayline._core.histories import History, parse_history
from wayline._core.planning import (
    Arrival,
    BeginUnwind,
    CancelChildren,
    EndUnwind,
    Park,
    RunCompensation,
    UnwindMove,
    WaitElsewhere,
    WaitForPerson,
    unwind_move,
)
from wayline._core.replay import Replay

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "decisions.jsonl"
LEASE = 860.0
OTHER = "unwind-moves-other-delivery"


def _golden(case: str) -> History:
    for number, line in enumerate(GOLDEN.read_text(encoding="utf-8").splitlines()):
        if line and json.loads(line)["case"] == case:
            return parse_history(line, f"{GOLDEN.name}:{number + 1}")
    raise AssertionError(f"no golden history {case!r}")


def _then(history: History, *added: tuple[EventType, dict[str, Any]], later: float = 0.1) -> None:
    """Append events to the history as the world would have stamped them."""
    for kind, data in added:
        last = history.events[-1]
        history.events.append(
            Event(last.run_id, last.seq + 1, kind, None, data, last.created_at + later)
        )


def _move(history: History, *, after: float = 0.5, me: str = OTHER) -> UnwindMove:
    replay = Replay(workflows.definition(history.workflow), history.run_id)
    try:
        replay.feed(history.events)
        now = history.events[-1].created_at + after
        arrival = Arrival(me, None, {})
        move = unwind_move(replay, arrival, now=now, lease=LEASE, ownership=True)
        again = unwind_move(replay, arrival, now=now, lease=LEASE, ownership=True)
        assert again == move, "the planner answers the same replay the same way"
        return move
    finally:
        replay.close()


CANCELLED = {"reason": "cancelled", "detail": "the customer changed their mind"}


def test_a_failed_step_begins_the_unwind_with_why_it_unwinds() -> None:
    move = _move(_golden("step-failed-terminally-the-unwind-begins"))
    assert isinstance(move, BeginUnwind)
    [begun] = move.events
    assert begun.type is EventType.RUN_COMPENSATING
    assert begun.data["reason"] == "failed"
    assert begun.data["error"]["message"] == "nothing to ship"


def test_reversals_run_latest_first_each_created_and_stamped_by_this_delivery() -> None:
    move = _move(_golden("compensations-in-reverse-the-reservation-after-the-refund"), me="me-1")
    assert isinstance(move, RunCompensation)
    assert (move.forward.cid, move.cid, move.attempt, move.recovery) == ("s1", "s1.c1", 1, False)
    created, started = move.events
    assert (created.type, created.correlation_id) == (EventType.STEP_CREATED, "s1.c1")
    assert created.data["compensates"] == "s1"
    assert started.data == {"attempt": 1, "ownerMessageId": "me-1", "lease": LEASE}


def test_a_failed_reversal_parks_the_run_naming_what_it_leaves_untried() -> None:
    move = _move(_golden("compensation-failed-the-run-parks"))
    assert isinstance(move, Park)
    assert move.failed is not None and move.failed.cid == "s2"
    assert move.stuck["error"]["message"] == "the refund desk is closed"
    assert [r["forwardId"] for r in move.stuck["notRun"]] == ["s1"]


def test_a_parked_run_waits_and_a_resume_tries_again_in_a_new_epoch() -> None:
    assert isinstance(_move(_golden("compensation-stuck-waits-for-a-person")), WaitForPerson)
    move = _move(_golden("compensation-resumed-tried-again-in-a-new-epoch"))
    assert isinstance(move, RunCompensation)
    assert (move.cid, move.events[0].data["epoch"]) == ("s2.c1", 1)


def test_an_abandoned_unwind_ends_the_run_failed_and_abandoned() -> None:
    move = _move(_golden("compensation-abandoned"))
    assert isinstance(move, EndUnwind)
    assert move.abandoned and move.why["reason"] == "failed"


def test_a_cancel_mid_step_waits_for_the_live_owner_then_reverses_the_unknown_outcome() -> None:
    live = _golden("cancel-mid-step-waits-for-the-owned-body")
    _then(live, (EventType.RUN_COMPENSATING, CANCELLED))
    move = _move(live)
    assert isinstance(move, WaitElsewhere) and move.backstop
    expired = _golden("cancel-mid-step-owner-lease-expired")
    _then(expired, (EventType.RUN_COMPENSATING, CANCELLED))
    move = _move(expired, after=LEASE + 1)
    assert isinstance(move, RunCompensation)
    assert (move.forward.cid, move.cid, move.recovery) == ("s1", "s1.c0", False)


def test_a_cancel_reaches_running_children_and_an_abandon_does_not_wait_for_them() -> None:
    history = _golden("child-started-the-parent-waits")
    _then(history, (EventType.RUN_CANCEL_REQUESTED, {"reason": "stop"}))
    assert isinstance(_move(history), BeginUnwind)
    _then(history, (EventType.RUN_COMPENSATING, {"reason": "cancelled", "detail": "stop"}))
    move = _move(history)
    assert isinstance(move, CancelChildren)
    assert [c.cid for c in move.children] == ["c1"] and move.then is None
    assert "was cancelled: stop" in move.why
    _then(
        history,
        (EventType.RUN_COMPENSATION_STUCK, {"step": "child", "error": {}}),
        (EventType.RUN_COMPENSATION_ABANDONED, {}),
    )
    move = _move(history)
    assert isinstance(move, CancelChildren)
    assert move.then == EndUnwind({"reason": "cancelled", "detail": "stop"}, abandoned=True)


def test_a_child_still_running_parks_a_failed_runs_unwind() -> None:
    history = _golden("child-started-the-parent-waits")
    _then(history, (EventType.RUN_COMPENSATING, {"reason": "failed", "error": {"message": "x"}}))
    move = _move(history)
    assert isinstance(move, Park) and move.failed is None
    assert move.stuck["error"]["code"] == "CHILD_RUNNING"
    assert move.stuck["stepId"] == "c1"
