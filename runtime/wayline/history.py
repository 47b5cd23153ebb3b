"""The public read model of runs: what a reader outside the runtime (the operator, a
dashboard) needs to read a run from its log, with nothing of the runtime's internals.

A run is its log of events (:class:`Event`); its view (:class:`RunView`, :class:`RunInfo`) is
the one fold of that log (:func:`fold`), the same the CLI, the console and the worlds read.
:func:`fmt_error` renders a recorded error as the CLI's timeline and the operator's Events
both show it, and :func:`waiting_for_worker` says when a run waits for a worker that serves
its definition. The step decisions (:func:`decide` and its :class:`Action`, :class:`StepState`)
are what a reader concludes about a step's delivery from the log and the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._core.dispatch import Action, StepState, decide, lease_remaining
from ._core.events import PAUSABLE, Event, EventType, RunStatus
from ._core.ids import is_run_id
from ._core.projections import RunInfo, RunView, debounced_until, fold
from .errors import ErrorCause
from .world.registry import waiting_for_worker

__all__ = [
    "PAUSABLE",
    "Action",
    "Event",
    "EventType",
    "RunInfo",
    "RunStatus",
    "RunView",
    "StepState",
    "debounced_until",
    "decide",
    "fmt_error",
    "fold",
    "is_run_id",
    "lease_remaining",
    "waiting_for_worker",
]


def fmt_error(error: Mapping[str, Any] | None) -> str:
    if not error:
        return "unknown error"
    cause = ErrorCause.from_recorded(error)  # a log of an older release reads the same way
    code, name = cause.code, cause.name
    if cause.step is not None or cause.run_id is not None:  # a chain: one sentence says it
        text = f"[{code}] {cause}"
    else:
        head = f"{name}: {cause.message}" if name and name != code else cause.message
        text = f"[{code}] {head}" if code != "USER_ERROR" else head
        # which attempt it was, the timeline's attempt lines say already
        why = cause.not_retried_because
        text += f" ({why})" if why else ""
    abandoned = cause.compensation_abandoned
    return text + (", and its compensation was abandoned" if abandoned else "")
