"""The replay a workflow function is running in, if any: one context variable.

The replay sets it while it steps its fibers; a step definition called inside a workflow reads
it to hand the call to the replay instead of running the body. Kept apart from ``replay`` so
that ``definitions`` (below ``replay``) can read it without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Protocol


class StepCaller(Protocol):
    """What a step call inside a workflow needs: ``Replay.call_step``."""

    def call_step(
        self, definition: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> Any: ...


replay_var: ContextVar[StepCaller | None] = ContextVar("wayline_replay", default=None)
