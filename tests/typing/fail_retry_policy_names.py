"""Must fail ``mypy --strict`` on the marked lines: Temporal's names keep their types, and take
no positions."""

from __future__ import annotations

import wayline

wayline.RetryPolicy(maximum_attempts="4")  # E: incompatible type "str"
wayline.RetryPolicy(non_retryable_error_types=[ValueError])  # E: List item 0 has incompatible type
wayline.RetryPolicy(backoff_coefficient="2")  # E: incompatible type "str"
wayline.RetryPolicy(4, 1.0, 2.0, None, 0.0, (), 5)  # E: Too many positional arguments
wayline.RetryPolicy(maximum_attempt=4)  # E: Unexpected keyword argument

