"""RetryPolicy's schedule is a pure function of (policy, step key, attempt)."""

from __future__ import annotations

import pytest

import wayline
from wayline._engine.step_runner import Failed, _retry_or_fail
from wayline.cli.timeline import fmt_schedule
from wayline.errors import ConfigurationError


def test_backoff_cap_and_seeded_jitter() -> None:
    p = wayline.RetryPolicy(max_attempts=6, initial="1s", backoff=2.0, max_interval="5s")
    assert [p.delay(n, "k") for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    j = wayline.RetryPolicy(initial=10, backoff=1.0, jitter=0.1)
    assert j.delay(1, "run:s#0:forward") == j.delay(1, "run:s#0:forward")  # replay-stable
    spread = {j.delay(1, f"run{i}:s#0:forward") for i in range(20)}
    assert len(spread) > 1 and all(9.0 <= d <= 11.0 for d in spread)


def test_non_retryable_by_class_or_name() -> None:
    p = wayline.RetryPolicy(non_retryable=(LookupError, "ValueError"))
    assert not p.retryable(KeyError("x"))  # a subclass of LookupError
    assert not p.retryable(UnicodeError("x"))  # its MRO holds ValueError
    assert p.retryable(OSError("x"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"backoff": 0.5},
        {"jitter": 2.0},
        {"initial": "soon"},
        {"non_retryable": (42,)},
    ],
)
def test_bad_policies_are_configuration_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        wayline.RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retry_and_the_simple_form_do_not_mix() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        wayline.step(retry=wayline.RetryPolicy(), max_retries=2)


def test_the_simple_form_is_a_fixed_policy() -> None:
    @wayline.step(max_retries=2, retry_delay="3s")
    def simple() -> None: ...

    assert simple.retry.max_attempts == 3 and simple.retry.delay(2, "k") == 3.0
    assert (simple.max_retries, simple.retry_delay) == (2, 3.0)


def test_runs_show_describes_the_schedule() -> None:
    data = {
        "attempt": 2,
        "source": "policy",
        "policy": {"maxAttempts": 5, "backoff": 2.0, "maxInterval": 60.0, "jitter": 0.1},
    }
    assert fmt_schedule(data) == "attempt 2 of 5, backoff x2.0, max 1m 00s, jitter 0.1"
    assert fmt_schedule({**data, "source": "retry_after"}).endswith("retry_after from the step")
    assert fmt_schedule({}) == ""


@pytest.mark.parametrize("max_retries", [0, 2])
def test_the_last_failure_counts_its_attempts_in_fields(max_retries: int) -> None:
    @wayline.step(max_retries=max_retries, name="tests.gave_up_count")
    async def count() -> None: ...

    outcome = _retry_or_fail(count, max_retries + 1, OSError("reset"), None, "k")
    assert isinstance(outcome, Failed)
    assert outcome.error["message"] == "reset"  # the body's text, untouched
    assert outcome.error["attempt"] == outcome.error["attempts"] == max_retries + 1
    assert outcome.error["notRetriedBecause"] == "retries exhausted"
