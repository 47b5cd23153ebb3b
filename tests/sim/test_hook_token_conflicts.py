"""The simulator's runs that race for one hook token (``wayline.sim.conflicts``, issue #35):
a seed that draws them reaches ``HOOK_CONFLICT`` and the planner's ``fail_move`` in each of its
shapes, its invariants hold on the runtime as it is, and a runtime broken on purpose is caught
by the first seeds (docs/simulation.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from wayline._core import planning
from wayline._core.events import Event, EventType
from wayline._engine import handler
from wayline.sim import run_seed
from wayline.sim.conflicts import ConflictPlan, check_contender

RUN = "wf_" + "c" * 32
REFUSED = {"error": {"name": "WaylineError", "code": "HOOK_CONFLICT", "message": "held"}}


def _log(*kinds: tuple[EventType, str | None, dict[str, Any]]) -> list[Event]:
    return [Event(RUN, i + 1, t, cid, data, float(i)) for i, (t, cid, data) in enumerate(kinds)]


def _refused(seed: int, shapes: list[str], label: str) -> tuple[str, str]:
    """Run the seed, check it draws these shapes and passes, and that contender ``label``
    was refused: its trace and the refused run's short id."""
    assert [shape for _, shape in ConflictPlan.draw(seed).starts] == shapes
    outcome = run_seed(seed)
    assert outcome.violations == []
    started = re.search(rf"started contender {label} \(\w+\) as (\w+)", outcome.trace)
    assert started is not None, outcome.trace
    assert f"contender {started[1]} ended: run_failed HOOK_CONFLICT" in outcome.trace
    return outcome.trace, started[1]


def test_seed_2_fails_a_refused_contender_with_nothing_to_reverse_at_once() -> None:
    trace, run = _refused(2, ["child", "bare", "bare"], "c2")
    assert f"body refund {run}" not in trace
    assert run_seed(2).trace == trace  # the same seed, the same history


def test_seed_13_unwinds_a_refused_contender_with_a_live_child_once_a_person_resumes() -> None:
    trace, run = _refused(13, ["child", "child", "steps"], "c1")
    assert f"client resumed the unwind of {run}: True" in trace
    assert len(re.findall(rf"body refund {run}/s1\.c\d+ #1 begins", trace)) == 1


def test_seed_21_unwinds_a_refused_contender_with_a_completed_step() -> None:
    trace, run = _refused(21, ["child", "bare", "steps"], "c2")
    assert len(re.findall(rf"body refund {run}/s1\.c0 #1 begins", trace)) == 1


def test_a_seed_without_contenders_draws_none() -> None:
    assert ConflictPlan.draw(0) == ConflictPlan()
    assert "contender" not in run_seed(0).trace


def _violations_with(monkeypatch: pytest.MonkeyPatch, broken: Any, seed: int) -> list[str]:
    monkeypatch.setattr(handler, "fail_move", broken)
    return run_seed(seed).violations


def test_a_fail_move_that_drops_the_refused_batchs_attributes_is_caught_by_seed_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = planning.fail_move

    def forgetful(replay: Any, failure: planning.RunFailure) -> planning.FailMove:
        move = real(replay, failure)
        if isinstance(move, planning.FailNow | planning.BeginFailedUnwind):
            kept = [e for e in move.events if e.type is not EventType.ATTRIBUTES_SET]
            return type(move)(move.failure, kept)
        return move

    violations = _violations_with(monkeypatch, forgetful, 2)
    assert any("lost its refused batch's attribute" in v for v in violations), violations


def test_a_fail_move_that_ends_a_run_with_a_completed_step_at_once_is_caught_by_seed_13(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def hasty(replay: Any, failure: planning.RunFailure) -> planning.FailMove:
        if replay.terminal is not None:
            return planning.Done()
        failed = planning.NewEvent(EventType.RUN_FAILED, data={"error": failure.error()})
        return planning.FailNow(failure, [*replay.new_attributes, failed])

    violations = _violations_with(monkeypatch, hasty, 13)
    assert any("reversed step s1 0 times, not 1" in v for v in violations), violations


def test_the_contender_check_reports_each_broken_promise() -> None:
    found: list[str] = []
    check_contender(
        RUN,
        _log(
            (EventType.RUN_CREATED, None, {"workflow": "sim.contender"}),
            (EventType.STEP_CREATED, "s1", {"stepName": "sim.charge"}),
            (EventType.STEP_COMPLETED, "s1", {}),
            (EventType.STEP_CREATED, "s2", {"stepName": "sim.charge"}),
            (
                EventType.STEP_CREATED,
                "s3",
                {"stepName": "sim.charge:compensate", "compensates": "s2"},
            ),
            (EventType.RUN_COMPENSATING, None, {"reason": "failed", **REFUSED}),
            (EventType.RUN_FAILED, None, REFUSED),
            (EventType.RUN_FAILED, None, REFUSED),
        ),
        found.append,
    )
    short = RUN[-6:]
    assert found == [
        f"contender {short} refused its hook and ended run_failed#7, run_failed#8, not failed once",
        f"contender {short} lost its refused batch's attribute",
        f"contender {short} reversed step s1 0 times, not 1",
        f"contender {short} reversed step s2 1 times, not 0",
    ]
    found.clear()
    check_contender(
        RUN,
        _log(
            (EventType.RUN_CREATED, None, {"workflow": "sim.contender"}),
            (EventType.ATTRIBUTES_SET, None, {"set": {"contender": "c0"}}),
            (EventType.ATTRIBUTES_SET, None, {"set": {"contender": "c0"}}),
            (EventType.RUN_FAILED, None, REFUSED),
        ),
        found.append,
    )
    assert found == [f"contender {short} recorded its attribute 2 times"]
