"""The simulator's invariants of the later features can fail: a runtime broken on purpose is
caught by the first seeds (docs/simulation.md), and each log check reports the history it
exists for, built by hand."""

from __future__ import annotations

from typing import Any

import pytest

from wayline import worker as worker_module
from wayline._core import rate_limits
from wayline._core.events import Event, EventType
from wayline.sim import run_seed
from wayline.sim.feature_checks import (
    Seen,
    check_debounced_log,
    check_redrives,
    check_tokens,
    paused_when_started,
)
from wayline.world import routing

RUN = "wf_" + "a" * 32


def _log(*kinds: tuple[EventType, str | None, float, dict[str, Any]]) -> list[Event]:
    return [Event(RUN, i + 1, t, cid, data, at) for i, (t, cid, at, data) in enumerate(kinds)]


def test_a_bucket_that_hands_out_one_extra_token_is_caught_by_seed_31(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = rate_limits.take

    def generous(bucket: Any, now: float, per_second: float, burst: int, holder: Any) -> Any:
        return real(bucket, now, per_second, burst + 1, holder)

    monkeypatch.setattr(rate_limits, "take", generous)
    violations = run_seed(31).violations
    assert any("rate key step:sim.paced:sim gave" in v for v in violations), violations


def test_a_draining_worker_that_takes_new_runs_is_caught_by_seed_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_draining(kind: str, workflows: Any, queue: Any, *, draining: bool = False) -> Any:
        return routing.served_topics(kind, workflows, queue, draining=False)

    monkeypatch.setattr(worker_module, "served_topics", not_draining)
    violations = run_seed(2).violations
    assert any("draining p3 took run" in v for v in violations), violations


def test_the_token_check_reports_a_window_above_burst_and_rate() -> None:
    seen = Seen(tokens={"k": [(0.0, "a"), (0.1, "b"), (0.2, "c"), (1.5, "d")]})
    found: list[str] = []
    check_tokens(seen, {"k": (1.0, 2)}, found.append)
    assert found == ["rate key k gave 3 tokens in 0.200s, above burst 2 + 1.0/s"]
    found.clear()
    check_tokens(
        Seen(tokens={"k": [(0.0, "a"), (0.1, "b"), (1.2, "c")]}), {"k": (1.0, 2)}, found.append
    )
    assert found == []


def test_the_redrive_check_reports_two_redrives_of_one_failure() -> None:
    found: list[str] = []
    log = _log(
        (EventType.STEP_FAILED, "s2", 1.0, {}),
        (EventType.RUN_FAILED, None, 1.0, {}),
        (EventType.RUN_REDRIVEN, "s2", 2.0, {}),
        (EventType.RUN_REDRIVEN, "s2", 2.0, {}),
        (EventType.STEP_COMPLETED, "s2", 3.0, {}),
        (EventType.RUN_COMPLETED, None, 3.0, {}),
    )
    check_redrives(RUN, log, found.append)
    assert found == ["run aaaaaa has a run_redriven (#4) not after a failure"]
    found.clear()
    check_redrives(RUN, log[:3] + log[4:], found.append)
    assert found == []


def test_the_pause_check_names_a_step_started_while_paused() -> None:
    log = _log(
        (EventType.STEP_STARTED, "s1", 1.0, {}),
        (EventType.RUN_PAUSED, None, 2.0, {}),
        (EventType.STEP_STARTED, "s2", 3.0, {}),
        (EventType.RUN_UNPAUSED, None, 4.0, {}),
        (EventType.STEP_STARTED, "s3", 5.0, {}),
    )
    assert paused_when_started(log, "s1") is None  # it began before the pause
    assert paused_when_started(log, "s2") == 2  # recorded while paused, whatever came after
    assert paused_when_started(log, "s3") is None


def test_the_debounce_check_reports_a_run_that_began_within_its_period() -> None:
    found: list[str] = []
    log = _log(
        (EventType.RUN_CREATED, None, 0.0, {"input": {"args": ["doc", "v0"]}}),
        (EventType.RUN_DEBOUNCED, None, 3.0, {"input": {"args": ["doc", "v1"]}}),
        (EventType.RUN_STARTED, None, 4.0, {}),
    )
    check_debounced_log(RUN, log, Seen(indexed={RUN: ["v0"]}), 5.0, found.append)
    assert found == [
        "debounced run aaaaaa began 1.000s after its last start, within its period of 5s",
        "debounced run aaaaaa ran version v0, not its last start's v1",
    ]
