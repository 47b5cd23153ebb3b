"""The rules a pause follows in every world (``apply_transition``) and the policy field that
asks for one (``RetryPolicy.on_exhausted``): pure, no world needed."""

from __future__ import annotations

import itertools

import pytest

from wayline import RetryPolicy
from wayline._core.events import Event, EventType, NewEvent, RunStatus, apply_transition
from wayline._core.planning import HELD_DELAY_MAX, HELD_DELAY_MIN, held_delay, holds_a_step
from wayline._core.projections import StepView
from wayline.errors import ConfigurationError, EntityConflictError, RunTerminalError


def _paused(before: str) -> NewEvent:
    return NewEvent(EventType.RUN_PAUSED, data={"reason": "r", "statusBefore": before})


def test_a_pause_holds_a_pending_or_running_run_and_the_unpause_returns_it_there() -> None:
    for status in (RunStatus.PENDING, RunStatus.RUNNING):
        paused, _ = apply_transition(status, None, _paused(str(status)))
        assert paused is RunStatus.PAUSED
        back = NewEvent(EventType.RUN_UNPAUSED, data={"status": str(status)})
        assert apply_transition(paused, None, back) == (status, None)


@pytest.mark.parametrize(
    ("status", "refusal"),
    [
        (RunStatus.PAUSED, "already paused"),
        (RunStatus.COMPENSATING, "only a pending or running run pauses"),
        (RunStatus.BLOCKED, "only a pending or running run pauses"),
    ],
)
def test_a_pause_is_refused_over_anything_else(status: RunStatus, refusal: str) -> None:
    with pytest.raises(EntityConflictError, match=refusal):
        apply_transition(status, None, _paused("running"))


def test_a_pause_that_records_another_status_than_the_runs_is_refused() -> None:
    with pytest.raises(EntityConflictError, match="not pending as its pause records"):
        apply_transition(RunStatus.RUNNING, None, _paused("pending"))


def test_an_unpause_needs_a_pause_and_an_ended_run_takes_neither() -> None:
    unpause = NewEvent(EventType.RUN_UNPAUSED, data={"status": "running"})
    with pytest.raises(EntityConflictError, match="not paused"):
        apply_transition(RunStatus.RUNNING, None, unpause)
    with pytest.raises(EntityConflictError, match="not compensating"):
        bad = NewEvent(EventType.RUN_UNPAUSED, data={"status": "compensating"})
        apply_transition(RunStatus.PAUSED, None, bad)
    with pytest.raises(RunTerminalError):
        apply_transition(RunStatus.COMPLETED, None, _paused("running"))


@pytest.mark.parametrize(
    ("after", "status"),
    [(None, RunStatus.RUNNING), ("pending", RunStatus.PENDING), ("running", RunStatus.RUNNING)],
)
def test_an_unpause_that_records_no_status_returns_the_run_to_running(
    after: str | None, status: RunStatus
) -> None:
    data = {} if after is None else {"status": after}
    unpause = NewEvent(EventType.RUN_UNPAUSED, data=data)
    assert apply_transition(RunStatus.PAUSED, None, unpause) == (status, None)


@pytest.mark.parametrize("after", ["paused", "completed", "", 1, ["running"], {"s": "running"}])
def test_an_unpause_to_anything_but_pending_or_running_is_refused(after: object) -> None:
    """A stored entry's data is any JSON, a list or an object among them: refused, not a crash."""
    unpause = NewEvent(EventType.RUN_UNPAUSED, data={"status": after})
    with pytest.raises(EntityConflictError, match="returns a run to pending or running"):
        apply_transition(RunStatus.PAUSED, None, unpause)


def test_a_stored_event_is_judged_as_it_is_without_a_new_event_built() -> None:
    """Reading a log judges each stored Event (world/entries.py) as the append judged it."""
    stored = Event("run-pause-rules", 3, EventType.RUN_UNPAUSED, None, {"status": "pending"}, 0.0)
    assert apply_transition(RunStatus.PAUSED, None, stored) == (RunStatus.PENDING, None)


def test_an_unwind_is_not_appended_over_a_pause_but_a_log_that_has_one_still_reads() -> None:
    """A worker that failed the run before it read the pause waits for the unpause; a log
    an older version wrote with an unwind over a pause folds as it did."""
    begun = NewEvent(EventType.RUN_COMPENSATING, data={"reason": "failed", "error": {}})
    with pytest.raises(EntityConflictError, match="paused; its unwind begins when it is unpaused"):
        apply_transition(RunStatus.PAUSED, None, begun, appending=True)
    assert apply_transition(RunStatus.PAUSED, None, begun) == (RunStatus.COMPENSATING, None)
    assert apply_transition(RunStatus.RUNNING, None, begun, appending=True) == (
        RunStatus.COMPENSATING,
        None,
    )


def test_a_step_attempt_is_not_appended_over_a_pause_but_a_log_that_has_one_still_reads() -> None:
    """Owned recovery that read the log before a pause re-stamps its step after it (simulator
    seed 285): the world refuses it; a log an older version wrote with one folds as it did."""
    start = NewEvent(EventType.STEP_STARTED, "s1", {"attempt": 2})
    with pytest.raises(EntityConflictError, match="paused; no step attempt starts"):
        apply_transition(RunStatus.PAUSED, "running", start, appending=True)
    assert apply_transition(RunStatus.PAUSED, "running", start) == (RunStatus.PAUSED, "running")
    assert apply_transition(RunStatus.RUNNING, "running", start, appending=True) == (
        RunStatus.RUNNING,
        "running",
    )


def test_on_exhausted_takes_fail_or_pause() -> None:
    assert RetryPolicy().on_exhausted == "fail"
    assert RetryPolicy(on_exhausted="pause").describe()["onExhausted"] == "pause"
    with pytest.raises(ConfigurationError, match="'fail' or 'pause', not 'retry'"):
        RetryPolicy(on_exhausted="retry")  # type: ignore[arg-type]


def test_a_delivery_held_by_a_pause_comes_back_sooner_after_a_short_pause_never_past_30s() -> None:
    assert held_delay(None, 100.0) == HELD_DELAY_MIN
    assert held_delay(100.0, 101.0) == HELD_DELAY_MIN
    assert held_delay(100.0, 140.0) == 10.0
    assert held_delay(100.0, 100.0 + 86_400) == HELD_DELAY_MAX
    assert held_delay(200.0, 100.0) == HELD_DELAY_MIN  # a clock behind the world's


def test_the_held_delay_starts_from_the_least_it_is_given_and_keeps_the_30s_cap() -> None:
    """The worker passes its ``held_delay_seconds``: a short one brings the first return
    sooner, a quarter of the pause's age still takes over once larger, and 30 s still caps it."""
    assert held_delay(None, 100.0, 0.1) == 0.1
    assert held_delay(100.0, 101.0, 0.1) == 0.25
    assert held_delay(100.0, 101.0, 5.0) == 5.0
    assert held_delay(100.0, 140.0, 0.1) == 10.0
    assert held_delay(100.0, 100.0 + 86_400, 0.1) == HELD_DELAY_MAX
    assert held_delay(100.0, 100.0 + 86_400, HELD_DELAY_MAX) == HELD_DELAY_MAX


def test_only_a_forward_step_still_stamped_by_the_delivery_holds_it() -> None:
    def step(
        owner: str, status: str, saw_retrying: bool = False, compensates: str | None = None
    ) -> StepView:
        return StepView(
            "s1",
            "charge",
            1.0,
            status=status,
            owner=owner,
            saw_retrying=saw_retrying,
            compensates=compensates,
        )

    assert holds_a_step("m1", [step(owner="m1", status="running")])
    assert not holds_a_step("m2", [step(owner="m1", status="running")])
    assert not holds_a_step("m1", [step(owner="m1", status="completed")])
    assert not holds_a_step("m1", [step(owner="m1", status="running", saw_retrying=True)])
    assert not holds_a_step("m1", [step(owner="m1", status="running", compensates="s0")])
    assert not holds_a_step("m1", [])


def test_the_held_delay_grows_with_the_delivery_s_own_hand_backs_on_a_clock_behind() -> None:
    """A worker whose clock is behind the pause's stamp reads its age as 0: the delivery's own
    count of hand-backs still lengthens each hand-back by a quarter, up to the 30 s cap, so
    the clock cannot keep it at the least (it came back every 0.1 s for as long as the pause
    lasted)."""
    behind = [held_delay(200.0, 100.0, 0.1, n) for n in range(40)]
    assert behind[0] == 0.1
    assert behind[1] == pytest.approx(0.125)
    assert all(a < b for a, b in itertools.pairwise(behind[:26]))
    assert behind[26:] == [HELD_DELAY_MAX] * 14
    assert held_delay(None, 100.0, 2.0, 3) == pytest.approx(2.0 * 1.25**3)
    # the pause's age still takes over once it asks for more, and the cap holds both
    assert held_delay(100.0, 140.0, 0.1, 1) == 10.0
    assert held_delay(100.0, 101.0, 2.0, 10**9) == HELD_DELAY_MAX
    assert held_delay(None, 100.0, 0.1, -5) == 0.1  # a count below 0 counts as none
