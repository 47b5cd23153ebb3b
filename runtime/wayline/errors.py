"""Wayline's two error families.

User control: :class:`RetryableError` and :class:`FatalError`, raised from step bodies to steer
retries. Framework errors derive from :class:`WaylineError` and carry a stable ``code`` so that
logs, run failures and the CLI speak the same words. Suspension signals derive from
``BaseException`` so a user's ``except Exception`` cannot swallow them.
"""

from __future__ import annotations

from typing import Any

from ._core.durations import Duration, to_seconds


class RetryableError(Exception):
    """Raised by a step body: try again after ``retry_after`` (default: the step's retry_delay)."""

    def __init__(self, message: str = "", *, retry_after: Duration | None = None) -> None:
        super().__init__(message)
        self.retry_after: float | None = None if retry_after is None else to_seconds(retry_after)


class FatalError(Exception):
    """Raised by a step body or the runtime: fail the step now, no retries."""


class WaylineError(Exception):
    """Root of every framework error. ``code`` is stable and documented."""

    code = "WAYLINE_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class ConfigurationError(WaylineError):
    code = "CONFIGURATION_ERROR"


class NotInWorkflowError(WaylineError):
    code = "NOT_IN_WORKFLOW"


class NotInStepError(WaylineError):
    code = "NOT_IN_STEP"


class SerializationError(FatalError, WaylineError):
    """A value cannot cross the durable boundary (JSON), or does not match its annotation."""

    code = "SERIALIZATION_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        WaylineError.__init__(self, message, **details)


class ReplayDivergenceError(WaylineError):
    code = "REPLAY_DIVERGENCE"


class WorkflowNotFoundError(WaylineError):
    code = "WORKFLOW_NOT_FOUND"


class StepNotFoundError(WaylineError):
    code = "STEP_NOT_FOUND"


class RunNotFoundError(WaylineError):
    code = "RUN_NOT_FOUND"


class HookNotFoundError(WaylineError):
    code = "HOOK_NOT_FOUND"


class HookTimeout(WaylineError):
    """Raised inside a workflow when a hook's timeout elapses before a payload arrives."""

    code = "HOOK_TIMEOUT"


class AllFailedError(WaylineError):
    """Raised inside a workflow by ``wayline.any`` when every awaitable failed. ``errors``
    holds each failure in argument order."""

    code = "ALL_FAILED"

    def __init__(self, errors: list[BaseException]) -> None:
        listed = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        super().__init__(f"all {len(errors)} awaitables failed: {listed}")
        self.errors = errors


class InvalidPayloadError(WaylineError):
    code = "INVALID_PAYLOAD"


class RunFailedError(WaylineError):
    """Raised by ``RunHandle.result()`` when the run failed."""

    code = "RUN_FAILED"

    def __init__(self, message: str, *, error_code: str, error: dict[str, Any]) -> None:
        super().__init__(message, error_code=error_code)
        self.error_code = error_code
        self.error = error


class RunCancelledError(WaylineError):
    code = "RUN_CANCELLED"


class ResultTimeoutError(WaylineError):
    code = "RESULT_TIMEOUT"


# --- world errors: what an append or a queue call can answer -------------------------------


class WorldError(WaylineError):
    code = "WORLD_ERROR"


class WorldUnavailableError(WorldError):
    """The store cannot be reached, read or written (locked, unreadable, server down)."""

    code = "WORLD_UNAVAILABLE"


class RunTerminalError(WorldError):
    """Nothing is appended to a run that has completed, failed or been cancelled."""

    code = "RUN_TERMINAL"


class EntityConflictError(WorldError):
    """A duplicate ``*_created``, or a second terminal event for one step/hook/wait."""

    code = "ENTITY_CONFLICT"


class EntityMissingError(WorldError):
    """An event refers to a step, hook or wait that was never created."""

    code = "ENTITY_MISSING"


class SequenceConflictError(WorldError):
    """Optimistic concurrency: the run's log moved on since the writer last read it."""

    code = "SEQUENCE_CONFLICT"


class HookTokenConflictError(WorldError):
    code = "HOOK_TOKEN_CONFLICT"


# --- signals ---------------------------------------------------------------------------------


class _Signal(BaseException):
    """Base of control-flow signals that user code must not catch."""
