"""Must fail ``mypy --strict``: ``compensate_retry=`` takes a ``wayline.RetryPolicy``."""

from __future__ import annotations

import wayline


def unbook(flight: str) -> None:
    pass


@wayline.step(compensate=unbook, compensate_retry=3)  # E: No overload variant of "step" matches argument types
def book(flight: str) -> str:
    return flight


@wayline.step(compensate=unbook, compensate_retry={"max_attempts": 2})  # E: No overload variant of "step" matches argument types
def book_again(flight: str) -> str:
    return flight
