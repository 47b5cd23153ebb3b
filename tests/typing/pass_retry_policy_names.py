"""Must pass ``mypy --strict``: a ``RetryPolicy`` takes Wayline's names or Temporal's."""

from __future__ import annotations

from datetime import timedelta
from typing import assert_type

import wayline

wayline_named = wayline.RetryPolicy(
    max_attempts=4, initial="1s", backoff=2.0, max_interval="1m", non_retryable=(ValueError, "X")
)
temporal_named = wayline.RetryPolicy(
    maximum_attempts=4,
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    non_retryable_error_types=["ValueError", "X"],
)
positional = wayline.RetryPolicy(4, 1.0, 2.0, None, 0.0, ())
assert_type(temporal_named.max_attempts, int)
assert_type(temporal_named.non_retryable, tuple[type[BaseException] | str, ...])


@wayline.step(retry=temporal_named)
async def charge(amount: int) -> int:
    return amount
