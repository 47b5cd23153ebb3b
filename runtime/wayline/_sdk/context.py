"""Where code runs: the replay a workflow function is running in, or the step being executed.

Functions that only make sense inside a workflow (or a step) look them up here and raise a
named error elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._core.current import replay_var
from .._core.replay import Replay
from ..errors import NotInStepError, NotInWorkflowError

_step: ContextVar[StepContext | None] = ContextVar("wayline_step", default=None)


@dataclass(frozen=True, slots=True)
class StepContext:
    run_id: str
    step_name: str
    step_id: str
    attempt: int
    idempotency_key: str
    """``run:step#occurrence:direction`` (seed 004): the same on every attempt and replay."""
    direction: str = "forward"
    forward_idempotency_key: str | None = None
    forward_result: Any = None
    started_at: datetime | None = None
    """When this attempt's body began (the worker's clock; set for every attempt)."""


def current_replay(api: str) -> Replay:
    replay = replay_var.get()
    if not isinstance(replay, Replay):
        raise NotInWorkflowError(f"wayline.{api}() can only be called inside a workflow function")
    return replay


def step_context() -> StepContext:
    """The step being executed: run id, step name, attempt and its idempotency key."""
    ctx = _step.get()
    if ctx is None:
        raise NotInStepError("wayline.step_context() can only be called inside a step body")
    return ctx


@contextmanager
def entered(ctx: StepContext) -> Iterator[StepContext]:
    """Run the block as the step ``ctx`` describes: ``step_context()`` returns ``ctx`` in it,
    and the step in force before is back after it."""
    token = _step.set(ctx)
    try:
        yield ctx
    finally:
        _step.reset(token)
