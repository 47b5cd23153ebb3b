"""The two refusals a world makes over a paused run, each taken out in turn, and the seed of
today's workload that catches each (docs/simulation.md, "Does it find real races?"): without
the refusal of ``run_compensating`` over a pause (f9829ef), seed 990 unwinds a run that failed
in its own code after a pause and starts its refund in the paused run; without the refusal of
a step attempt's ``step_started`` over a pause (cfd047e), seed 285 re-stamps an owned step's
start after a pause and runs its second attempt in the paused run. Neither refusal covers the
other's race: once ``run_compensating`` is written the run is compensating, not paused, so a
compensation's start is not refused."""

from __future__ import annotations

import pytest

from wayline._core import events
from wayline._core.events import RunStatus
from wayline.sim import run_seed

UNWIND_CAUGHT_BY = 990
"""The first seed that catches an unwind recorded over a pause (seeds from 0)."""
START_CAUGHT_BY = 285
"""The first seed that catches a step attempt started over a pause (seeds from 0)."""

UNWIND_RACE = "body of refund"
START_RACE = "body of charge"


def _without_unwind_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """As before f9829ef: ``run_compensating`` is taken over a pause (a run already unwinding
    is still refused, as it was then)."""
    unwind = events._unwind_transition

    def over_a_pause(run_status: RunStatus, appending: bool) -> RunStatus:
        return unwind(run_status, False)

    monkeypatch.setattr(events, "_unwind_transition", over_a_pause)


def _without_start_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """As before cfd047e: a step attempt's ``step_started`` is taken over a pause."""
    monkeypatch.setattr(events, "_refuse_a_start_over_a_pause", lambda run_status: None)


def _paused_starts(violations: list[str]) -> list[str]:
    return [v for v in violations if "was started while its run was paused" in v]


def test_an_unwind_over_a_pause_is_caught_by_its_seed_and_replays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_unwind_refusal(monkeypatch)
    first, second = run_seed(UNWIND_CAUGHT_BY), run_seed(UNWIND_CAUGHT_BY)
    caught = _paused_starts(first.violations)
    assert caught and all(UNWIND_RACE in v for v in caught), first.violations
    assert first.trace.encode() == second.trace.encode()


def test_a_start_over_a_pause_is_caught_by_its_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_start_refusal(monkeypatch)
    caught = _paused_starts(run_seed(START_CAUGHT_BY).violations)
    assert caught and all(START_RACE in v for v in caught), caught


def test_the_start_refusal_does_not_catch_the_unwind_race(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The unwind's seed passes with only the start refusal taken out, and fails the same way
    with both taken out: the start refusal is not what guards it."""
    _without_start_refusal(monkeypatch)
    assert run_seed(UNWIND_CAUGHT_BY).violations == []
    _without_unwind_refusal(monkeypatch)
    caught = _paused_starts(run_seed(UNWIND_CAUGHT_BY).violations)
    assert caught and all(UNWIND_RACE in v for v in caught), caught


@pytest.mark.parametrize("seed", [UNWIND_CAUGHT_BY, START_CAUGHT_BY])
def test_both_seeds_pass_with_both_refusals(seed: int) -> None:
    assert run_seed(seed).violations == []
