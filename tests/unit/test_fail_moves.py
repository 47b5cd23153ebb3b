"""A failure the world finds (a refused decision batch) as a pure planner move, over golden
histories: ``planning.fail_move`` reads the replay and says whether the run fails at once
(``FailNow``) or begins its unwind (``BeginFailedUnwind``), with the events either records.

The histories are recorded logs (``tests/golden/decisions.jsonl``): two runs that waited on a
hook token another run held, cut just before the world refused their batch, and the same logs
later on. Nothing here writes or runs a body: the move is a value, and the events it names are
compared with the ones the recorded run wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden import workflows
from wayline._core.events import EventType
from wayline._core.histories import History, parse_history
from wayline._core.planning import (
    BeginFailedUnwind,
    Done,
    FailMove,
    FailNow,
    RunFailure,
    fail_move,
    held_delay,
    holds_a_step,
)
from wayline._core.projections import fold
from wayline._core.replay import Replay

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "decisions.jsonl"
ERROR_KEYS = {"name", "code", "message", "token", "holderRunId"}


def _golden(case: str) -> tuple[History, dict[str, object]]:
    """The case's history and its first probe's ``refused`` (the failure the world found)."""
    for number, line in enumerate(GOLDEN.read_text(encoding="utf-8").splitlines()):
        raw = json.loads(line) if line else {}
        if raw.get("case") == case:
            probe = raw["probes"][0]["probe"]
            return parse_history(line, f"{GOLDEN.name}:{number + 1}"), probe.get("refused", {})


def _failure(refused: dict[str, object]) -> RunFailure:
    fields = refused["fields"]
    assert isinstance(fields, dict)
    return RunFailure(str(refused["code"]), str(refused["message"]), fields)


def _move(history: History, failure: RunFailure) -> FailMove:
    replay = Replay(workflows.definition(history.workflow), history.run_id)
    try:
        replay.feed(history.events)
        move = fail_move(replay, failure)
        assert fail_move(replay, failure) == move, "the planner answers the same replay alike"
        return move
    finally:
        replay.close()


def test_a_refusal_before_any_step_fails_the_run_at_once_attributes_first() -> None:
    history, refused = _golden("hook-conflict-nothing-to-reverse-fails-at-once")
    move = _move(history, _failure(refused))
    assert isinstance(move, FailNow)
    attributes, failed = move.events
    assert attributes.type is EventType.ATTRIBUTES_SET
    assert attributes.data == {"set": {"stage": "awaiting-approval"}}
    assert failed.type is EventType.RUN_FAILED
    assert failed.data["error"]["code"] == "HOOK_CONFLICT"
    assert set(failed.data["error"]) == ERROR_KEYS
    assert "by" not in failed.data  # a failure of the run, not a worker's (nothing terminated)


def test_a_refusal_after_a_completed_step_begins_the_unwind_attributes_first() -> None:
    history, refused = _golden("hook-conflict-after-a-step-begins-the-unwind")
    move = _move(history, _failure(refused))
    assert isinstance(move, BeginFailedUnwind)
    assert [e.type for e in move.events] == [EventType.ATTRIBUTES_SET, EventType.RUN_COMPENSATING]
    assert move.events[1].data["reason"] == "failed"
    assert move.events[1].data["error"] == move.failure.error()


@pytest.mark.parametrize(
    ("cut", "later", "kind"),
    [
        (
            "hook-conflict-after-a-step-begins-the-unwind",
            "hook-conflict-over-a-begun-unwind-ends-the-run",
            BeginFailedUnwind,
        ),
        (
            "hook-conflict-nothing-to-reverse-fails-at-once",
            "hook-conflict-over-an-ended-run-is-done",
            FailNow,
        ),
    ],
)
def test_the_moves_events_are_the_ones_the_recorded_run_wrote(
    cut: str, later: str, kind: type[FailMove]
) -> None:
    """The run the golden history was cut from wrote, right after the cut, exactly the events
    the planner names (the later history of the same run holds them): same types, same
    order, same data. Both moves that write are checked, the unwind begun and the run failed
    at once."""
    before, refused = _golden(cut)
    after, _ = _golden(later)
    assert after.run_id == before.run_id  # one recorded run, read at two cuts
    move = _move(before, _failure(refused))
    assert isinstance(move, kind)
    written = after.events[len(before.events) :]
    assert [(e.type, e.correlation_id, e.data) for e in written] == [
        (e.type, e.correlation_id, e.data) for e in move.events
    ]


def test_a_refusal_while_a_child_runs_begins_the_unwind_to_wait_for_it() -> None:
    history, refused = _golden("hook-conflict-with-a-child-running-begins-the-unwind")
    replay = Replay(workflows.definition(history.workflow), history.run_id)
    try:
        replay.feed(history.events)
        assert replay.compensation_plan() == [] and len(replay.pending_children()) == 1
    finally:
        replay.close()
    move = _move(history, _failure(refused))
    assert isinstance(move, BeginFailedUnwind)
    assert [e.type for e in move.events] == [EventType.RUN_COMPENSATING]


def test_a_run_already_unwinding_is_not_begun_again_it_ends_at_once() -> None:
    history, refused = _golden("hook-conflict-over-a-begun-unwind-ends-the-run")
    move = _move(history, _failure(refused))
    assert isinstance(move, FailNow)
    assert [e.type for e in move.events] == [EventType.RUN_FAILED]


def test_a_run_already_ended_is_left_as_it_is() -> None:
    history, refused = _golden("hook-conflict-over-an-ended-run-is-done")
    assert history.events[-1].type is EventType.RUN_FAILED
    assert isinstance(_move(history, _failure(refused)), Done)


def test_a_paused_runs_step_is_held_by_its_owners_delivery_alone() -> None:
    """The run was paused while its step's body ran: the owner's redelivery holds the step
    (handed back, not acknowledged), for 2 s at first and a quarter of the pause's age later,
    at most 30 s; any other delivery holds nothing."""
    history, _ = _golden("paused-over-a-step-its-owners-redelivery-is-handed-back")
    steps = fold(history.run_id, history.events).steps.values()
    [started] = [e for e in history.events if e.type is EventType.STEP_STARTED]
    [paused] = [e for e in history.events if e.type is EventType.RUN_PAUSED]
    owner = str(started.data["ownerMessageId"])
    assert holds_a_step(owner, steps)
    assert not holds_a_step("another-delivery", steps)
    at = paused.created_at
    assert [held_delay(at, at + age) for age in (1.0, 40.0, 400.0)] == [2.0, 10.0, 30.0]
