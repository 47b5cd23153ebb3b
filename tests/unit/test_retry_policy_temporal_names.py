"""``RetryPolicy`` takes Temporal's field names as aliases of its own: one policy either way."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

import wayline
from wayline.errors import ConfigurationError

WAYLINE = wayline.RetryPolicy(
    max_attempts=5,
    initial=timedelta(seconds=2),
    backoff=3.0,
    max_interval="1m",
    non_retryable=("ValueError", "KeyError"),
)
TEMPORAL = wayline.RetryPolicy(
    maximum_attempts=5,
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=3.0,
    maximum_interval="1m",
    non_retryable_error_types=["ValueError", "KeyError"],
)


def test_both_forms_are_one_policy() -> None:
    assert TEMPORAL == WAYLINE
    assert repr(TEMPORAL) == repr(WAYLINE)
    assert hash(TEMPORAL) == hash(WAYLINE)
    assert TEMPORAL.describe() == WAYLINE.describe()
    assert dataclasses.replace(TEMPORAL, jitter=0.1) == dataclasses.replace(WAYLINE, jitter=0.1)
    assert wayline.RetryPolicy() == wayline.RetryPolicy(4, 1.0, 2.0, None, 0.0, ())


def test_a_step_records_either_form_with_one_identity() -> None:
    @wayline.step(retry=WAYLINE, name="tests.temporal_names.by_wayline")
    async def by_wayline() -> None: ...

    @wayline.step(retry=TEMPORAL, name="tests.temporal_names.by_temporal")
    async def by_temporal() -> None: ...

    # the entry is (kind, name, options): the names differ, what the policy records may not
    assert by_temporal.identity_entry()[2] == by_wayline.identity_entry()[2]
    assert by_temporal.retry == by_wayline.retry


def test_attempts_count_the_same_in_every_form() -> None:
    @wayline.step(max_retries=3, name="tests.temporal_names.simple")
    async def simple() -> None: ...

    assert simple.retry.max_attempts == 4
    assert wayline.RetryPolicy(maximum_attempts=4).max_retries == simple.max_retries == 3


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        (
            {"max_attempts": 3, "maximum_attempts": 3},
            "max_attempts= or Temporal's maximum_attempts=",
        ),
        ({"initial": 1, "initial_interval": 1}, "initial= or Temporal's initial_interval="),
        (
            {"backoff": 2.0, "backoff_coefficient": 2.0},
            "backoff= or Temporal's backoff_coefficient=",
        ),
        (
            {"max_interval": None, "maximum_interval": 5},
            "max_interval= or Temporal's maximum_interval=",
        ),
        ({"non_retryable": (), "non_retryable_error_types": []}, "non_retryable= or Temporal's"),
    ],
)
def test_both_names_of_one_field_are_refused(kwargs: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigurationError, match="not both") as caught:
        wayline.RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert said in str(caught.value)


def test_temporals_unlimited_zero_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match="Wayline needs a bound"):
        wayline.RetryPolicy(maximum_attempts=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"maximum_attempts": -1},
        {"backoff_coefficient": 0.5},
        {"initial_interval": "soon"},
        {"maximum_interval": "-1s"},
        {"non_retryable_error_types": "ValueError"},
    ],
)
def test_bad_temporal_values_are_refused_as_wayline_ones(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        wayline.RetryPolicy(**kwargs)  # type: ignore[arg-type]
