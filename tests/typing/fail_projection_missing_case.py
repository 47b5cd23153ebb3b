"""Must fail ``mypy --strict``: a ``match`` over the event payloads that misses a type is an
error at its ``assert_never`` (what makes adding an event type one checked change)."""

from __future__ import annotations

from typing import assert_never

from wayline._core.projections import Payload, RunCreated, StepCreated


def describe(p: Payload) -> str:
    match p:
        case RunCreated():
            return "created"
        case StepCreated():
            return "step"
        case unknown:
            assert_never(unknown)  # E: Argument 1 to "assert_never" has incompatible type
