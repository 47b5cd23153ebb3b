"""Every exception Wayline raises or lets a user raise, in one tree.

User control: :class:`RetryableError` and :class:`FatalError`, raised from step bodies to steer
retries. Framework errors derive from :class:`WaylineError` and carry a stable ``code`` so that
logs, run failures and the CLI speak the same words::

    Exception
    ├── RetryableError                      a step body: try again (after ``retry_after``)
    ├── FatalError                          a step body: fail now, no retries
    │   ├── SerializationError (+Wayline)   SERIALIZATION_ERROR
    │   │   └── PayloadTooLargeError        PAYLOAD_TOO_LARGE: over a size limit
    │   ├── StepFailedError (+Wayline)      STEP_FAILED, inside a workflow
    │   └── ChildFailedError (+Wayline)     CHILD_FAILED, inside a parent
    └── WaylineError                        WAYLINE_ERROR
        ├── ConfigurationError              CONFIGURATION_ERROR
        ├── NotInWorkflowError              NOT_IN_WORKFLOW
        ├── NotInStepError                  NOT_IN_STEP
        ├── ReplayDivergenceError           REPLAY_DIVERGENCE
        ├── WorkflowDeterminismError        NON_DETERMINISTIC_AWAIT
        ├── WorkflowNotFoundError           WORKFLOW_NOT_FOUND
        ├── RunNotFoundError                RUN_NOT_FOUND
        ├── InvalidIdError                  INVALID_ID: not a run id or business id
        ├── RunAlreadyExistsError           RUN_ALREADY_EXISTS: ``StartOptions(id_conflict="fail")``
        ├── HookNotFoundError               HOOK_NOT_FOUND
        ├── HookBufferOccupiedError         HOOK_BUFFER_OCCUPIED: a payload waits for the token
        ├── WrongNamespaceError             WRONG_NAMESPACE: a hook of another namespace's run
        ├── HookTimeout                     HOOK_TIMEOUT, inside a workflow
        ├── ChildTimeoutError               CHILD_TIMEOUT, inside a parent
        ├── RunFailedError                  RUN_FAILED, from ``RunHandle.result()``
        ├── RunCancelledError               RUN_CANCELLED, from ``RunHandle.result()``
        ├── ResultTimeoutError              RESULT_TIMEOUT
        └── WorldError                      WORLD_ERROR: what a world call can answer
            ├── WorldUnavailableError       WORLD_UNAVAILABLE
            │   └── WorldStorageFullError   STORE_FULL: the store's disk or quota is full
            ├── RunTerminalError            RUN_TERMINAL
            ├── EntityConflictError         ENTITY_CONFLICT
            ├── EntityMissingError          ENTITY_MISSING
            ├── SequenceConflictError       SEQUENCE_CONFLICT
            ├── HookTokenConflictError      HOOK_TOKEN_CONFLICT
            └── CorruptEntryError           CORRUPT_ENTRY: bytes Wayline did not write
                └── CorruptLogError         CORRUPT_LOG: a run's log entry that does not decode
                    └── BlobMissingError    CORRUPT_LOG: an out-of-line payload it names is gone

The replay's one suspension signal (``NeedsStamp``) derives from ``BaseException`` so that a
user's ``except Exception`` cannot swallow it; it never leaves the engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from typing_extensions import deprecated

from .durations import Duration, to_seconds


class RetryableError(Exception):
    """Raised by a step body: try again after ``retry_after`` (default: the step's retry_delay)."""

    def __init__(self, message: str = "", *, retry_after: Duration | None = None) -> None:
        super().__init__(message)
        self.retry_after: float | None = None if retry_after is None else to_seconds(retry_after)


class FatalError(Exception):
    """Raised by a step body or the runtime: fail the step now, no retries."""


class WaylineError(Exception):
    """Root of every framework error. ``code`` is stable and documented; ``message`` is the
    text alone, without the code; ``cause`` is what made it (an :class:`ErrorCause` chain),
    None where nothing recorded did."""

    code = "WAYLINE_ERROR"
    cause: ErrorCause | None = None

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


# Before recorded errors carried these as fields, the engine appended them to the user's
# message; a log written then still reads, with the text split back into the fields.
_GAVE_UP = re.compile(r" \(gave up after (\d{1,9}) attempts?\)$")
_NON_RETRYABLE = re.compile(r" \(not retried: (\w+ is non-retryable)\)$")
_ABANDONED = " (compensation abandoned)"
_OLD_STEP = re.compile(r"^step '(.*)' failed: ", re.DOTALL)
_OLD_CHILD = re.compile(r"^child run (\S+) (\w+): ", re.DOTALL)
RETRIES_EXHAUSTED = "retries exhausted"


@dataclass(frozen=True, slots=True)
class ErrorCause:
    """One link of a failure's chain, read from what the run's log recorded. ``message`` is
    the text the raiser gave, untouched; the engine's own words are in the other fields.

    A run failed by a step reads ``RunFailedError.cause`` = ``STEP_FAILED`` (``step`` names
    it) whose ``cause`` is the step body's error (its ``name``, ``code``, ``attempt`` of
    ``attempts``, and ``not_retried_because``); a run failed by a child reads ``CHILD_FAILED``
    (``run_id`` is the child's) whose ``cause`` is the child's own failure, and so on."""

    code: str
    """A Wayline code (``STEP_FAILED``...), the body's ``wayline_code``, or ``USER_ERROR``."""
    message: str
    """The raiser's own text."""
    name: str | None = None
    """The exception's class name (``"ValueError"``)."""
    step: str | None = None
    """The failed step's name, on a ``STEP_FAILED`` link."""
    run_id: str | None = None
    """The child run's id, on a ``CHILD_FAILED`` link."""
    attempt: int | None = None
    """The attempt of the step that failed (1 for the first)."""
    attempts: int | None = None
    """How many attempts the step's retry policy allowed."""
    not_retried_because: str | None = None
    """Why that attempt was the last: ``"retries exhausted"``, ``"ValueError is
    non-retryable"``, ``"FatalError is never retried"``."""
    compensation_abandoned: bool = False
    """The run's unwind was abandoned (``Client.abandon_compensation``)."""
    cause: ErrorCause | None = None
    """What caused this one, if anything recorded it."""

    @classmethod
    def from_recorded(cls, error: Mapping[str, Any], depth: int = 8) -> ErrorCause:
        """Read a recorded error mapping (a ``run_failed`` or ``step_failed`` event's
        ``error``), of this release or an older one."""
        inner = error.get("cause")
        cause = (
            cls.from_recorded(inner, depth - 1)
            if depth > 1 and isinstance(inner, Mapping)
            else None
        )
        message = str(error.get("message", ""))
        abandoned = bool(error.get("compensationAbandoned"))
        attempt, attempts = _int(error.get("attempt")), _int(error.get("attempts"))
        why = error.get("notRetriedBecause")
        why = str(why) if why is not None else None
        # An older release appended these notes to the message. A record of this one keeps
        # them in fields and the message as the user wrote it, even when the user's own text
        # happens to end like one of them: only a record without the fields is parsed.
        old = not {"compensationAbandoned", "attempt", "notRetriedBecause", "step", "runId"} & (
            error.keys()
        )
        if old and message.endswith(_ABANDONED):
            message, abandoned = message[: -len(_ABANDONED)], True
        if old and (m := _GAVE_UP.search(message)) is not None:
            message, why = message[: m.start()], RETRIES_EXHAUSTED
            attempt = attempts = int(m.group(1))
        elif old and (m := _NON_RETRYABLE.search(message)) is not None:
            message, why = message[: m.start()], m.group(1)
        code = str(error.get("code") or "USER_ERROR")
        step, run_id = error.get("step"), error.get("runId")
        if code == "STEP_FAILED" and step is None and (m := _OLD_STEP.match(message)):
            step, message = m.group(1), cause.message if cause else message[m.end() :]
        if code == "CHILD_FAILED" and run_id is None and (m := _OLD_CHILD.match(message)):
            run_id, message = m.group(1), cause.message if cause else message[m.end() :]
        name = error.get("name")
        return cls(
            code=code,
            message=message,
            name=str(name) if name is not None else None,
            step=str(step) if step is not None else None,
            run_id=str(run_id) if run_id is not None else None,
            attempt=attempt,
            attempts=attempts,
            not_retried_because=why,
            compensation_abandoned=abandoned,
            cause=cause,
        )

    @property
    def root(self) -> ErrorCause:
        """The first error of the chain: what the user's code (or the engine) raised."""
        link = self
        while link.cause is not None:
            link = link.cause
        return link

    def __str__(self) -> str:
        """One clause: ``step 'charge' raised ValueError: card declined (attempt 3 of 3,
        retries exhausted)``."""
        if self.code == "STEP_FAILED" and self.step is not None:
            return f"step {self.step!r} raised {self.cause or self._plain()}"
        if self.code == "CHILD_FAILED" and self.run_id is not None:
            if self.cause is not None and self.cause.code == "RUN_CANCELLED":
                return f"child run {self.run_id} was cancelled ({self.cause.message})"
            return f"child run {self.run_id} failed because {self.cause or self._plain()}"
        return self._plain()

    @property
    def notes(self) -> str:
        """The engine's words on this link alone, ``"attempt 3 of 3, retries exhausted"``,
        or ``""``."""
        notes = []
        if self.attempt is not None:
            of = f" of {self.attempts}" if self.attempts is not None else ""
            notes.append(f"attempt {self.attempt}{of}")
        if self.not_retried_because:
            notes.append(self.not_retried_because)
        return ", ".join(notes)

    def _plain(self) -> str:
        label = self.code if self.name in (None, "WaylineError") else self.name
        if label != self.code and self.code != "USER_ERROR":  # the code is what to match on
            label = f"{label} [{self.code}]"
        text = f"{label}: {self.message}" if self.message else str(label)
        return f"{text} ({self.notes})" if self.notes else text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ConfigurationError(WaylineError):
    code = "CONFIGURATION_ERROR"


class WorldNotCreatedError(ConfigurationError):
    """A server world opened without ``create`` whose streams do not exist yet: a mistyped
    prefix, or a world no worker has created yet (a console pod starting before the
    workers), which a caller that was told to wait for the world may try again."""


class NotInWorkflowError(FatalError, WaylineError):
    """A workflow-only call (``sleep``, ``create_hook``, ``workflow_info``...) made elsewhere:
    a mistake no retry mends, so a step body that makes it fails at once."""

    code = "NOT_IN_WORKFLOW"

    def __init__(self, message: str, **details: Any) -> None:
        WaylineError.__init__(self, message, **details)


class NotInStepError(FatalError, WaylineError):
    """``step_context()`` called outside a step body: a mistake no retry mends."""

    code = "NOT_IN_STEP"

    def __init__(self, message: str, **details: Any) -> None:
        WaylineError.__init__(self, message, **details)


class SerializationError(FatalError, WaylineError):
    """A value cannot cross the durable boundary (JSON), or does not match its annotation."""

    code = "SERIALIZATION_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        WaylineError.__init__(self, message, **details)


class ReplayDivergenceError(WaylineError):
    code = "REPLAY_DIVERGENCE"


class WorkflowNotFoundError(WaylineError):
    code = "WORKFLOW_NOT_FOUND"


class RunNotFoundError(WaylineError):
    code = "RUN_NOT_FOUND"


class InvalidIdError(WaylineError):
    """An id ``Client.start`` (or the CLI) cannot take: a ``run_id=`` that is not ``wf_`` and
    32 lowercase hex digits, or a business id out of its limits (docs/sdk.md, "Business
    ids"), or an unknown id policy. Raised before anything is written."""

    code = "INVALID_ID"


class InvalidAttributesError(WaylineError, ValueError):
    """Search attributes a run cannot take: a name outside the documented pattern, a value of
    a type that is not indexed, or a count or size over its limit (docs/sdk.md, "Search
    attributes"). Raised before anything is written."""

    code = "INVALID_ATTRIBUTES"


class InvalidQueryError(WaylineError, ValueError):
    """A ``where`` expression of ``list_runs`` (or ``runs list --where``) that does not parse:
    not ``key OP value``, an unknown operator, or an order comparison of a boolean."""

    code = "INVALID_QUERY"


class RunAlreadyExistsError(WaylineError):
    """``Client.start`` found a run under the id it was given and does not start another:
    ``id_conflict="fail"``, or the run is of another workflow. ``run_id`` and ``status`` are
    the existing run's; ``business_id`` is the id it was asked for (None for a ``run_id=``)."""

    code = "RUN_ALREADY_EXISTS"

    def __init__(
        self, message: str, *, run_id: str, status: str, business_id: str | None = None
    ) -> None:
        super().__init__(message, run_id=run_id, status=status, business_id=business_id)
        self.run_id = run_id
        self.status = status
        self.business_id = business_id


class ForkRefusedError(WaylineError, ValueError):
    """``Client.fork`` cannot fork as asked: the run has not called the step (or not that many
    times), or a hook or child before it is still open. Nothing was created."""

    code = "FORK_REFUSED"


class RedriveRefusedError(WaylineError):
    """``Client.redrive`` refuses the run: it has not failed, it failed with no failed step to
    run again, or no live worker serves its definition identity. Nothing was recorded."""

    code = "REDRIVE_REFUSED"


class HookNotFoundError(WaylineError):
    code = "HOOK_NOT_FOUND"


class HookBufferOccupiedError(WaylineError):
    """``resume_hook(..., buffer=)`` for a token that has a buffered payload waiting already
    (under another delivery id): one payload waits per token and namespace."""

    code = "HOOK_BUFFER_OCCUPIED"


class WrongNamespaceError(WaylineError):
    """A client of one namespace (``Client(world, namespace=...)``, the operator for a
    WorkflowHook) asked to resume a hook whose run was not started in that namespace."""

    code = "WRONG_NAMESPACE"


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
    """Raised by ``RunHandle.result()`` when the run failed. ``code`` is ``RUN_FAILED``;
    ``cause`` is the run's recorded error as an :class:`ErrorCause` (``cause.code`` is
    ``STEP_FAILED``, ``CHILD_FAILED``, ``MAX_DELIVERIES_EXCEEDED``...); ``message`` is the
    text its first error was raised with, untouched; ``error`` is the recorded mapping."""

    code = "RUN_FAILED"
    cause: ErrorCause

    def __init__(
        self,
        message: str | None = None,
        *,
        error: Mapping[str, Any],
        run_id: str | None = None,
        error_code: str | None = None,
    ) -> None:
        cause = ErrorCause.from_recorded(error)
        super().__init__(cause.root.message if message is None else message, run_id=run_id)
        self.run_id = run_id
        self.error = dict(error)
        self.cause = cause
        # ``error_code=`` was the constructor's before ``cause``; a caller's value still wins
        self._error_code = cause.code if error_code is None else error_code

    @property
    @deprecated("RunFailedError.error_code is deprecated: use err.cause.code")
    def error_code(self) -> str:
        """Deprecated: ``err.cause.code`` (``deprecated`` warns at each read)."""
        return self._error_code

    def __str__(self) -> str:
        run = f"run {self.run_id}" if self.run_id else "the run"
        end = ", and its compensation was abandoned" if self.cause.compensation_abandoned else ""
        return f"{run} failed: {self.cause}{end}"


class RunCancelledError(WaylineError):
    code = "RUN_CANCELLED"


class ResultTimeoutError(WaylineError):
    code = "RESULT_TIMEOUT"


class HookWaitTimeoutError(WaylineError):
    """``Client.wait_for_hook`` gave up: no run waited on the token within its ``timeout``."""

    code = "HOOK_WAIT_TIMEOUT"


# --- raised inside a workflow function -------------------------------------------------------


class StepFailedError(FatalError, WaylineError):
    """Raised inside a workflow when a step failed for good (its retries are spent, or it
    raised :class:`FatalError`). ``message`` is the step body's own text, untouched;
    ``cause`` is the step's recorded error (name, code, attempt, why not retried) and
    ``error`` the recorded mapping."""

    code = "STEP_FAILED"
    cause: ErrorCause

    def __init__(self, step_name: str, error: Mapping[str, Any]) -> None:
        cause = ErrorCause.from_recorded(error)
        WaylineError.__init__(self, cause.message)
        self.step_name = step_name
        self.error = dict(error)
        self.cause = cause

    def __str__(self) -> str:
        return f"step {self.step_name!r} raised {self.cause}"


class ChildFailedError(FatalError, WaylineError):
    """Raised inside a parent when its child run failed or was cancelled. ``message`` is the
    text the child's first error was raised with; ``cause`` is the child's recorded error."""

    code = "CHILD_FAILED"
    cause: ErrorCause

    def __init__(self, child_run_id: str, status: str, error: Mapping[str, Any]) -> None:
        cause = ErrorCause.from_recorded(error)
        WaylineError.__init__(self, cause.root.message)
        self.child_run_id = child_run_id
        self.status = status
        self.error = dict(error)
        self.cause = cause

    def __str__(self) -> str:
        if self.status == "failed":
            return f"child run {self.child_run_id} failed because {self.cause}"
        return f"child run {self.child_run_id} {self.status}: {self.message}"


class ChildTimeoutError(WaylineError):
    """Raised inside a parent when its child's deadline (from the child's creation) passed.
    The child is not cancelled."""

    code = "CHILD_TIMEOUT"


class WorkflowDeterminismError(WaylineError):
    code = "NON_DETERMINISTIC_AWAIT"


# --- world errors: what an append or a queue call can answer -------------------------------


class WorldError(WaylineError):
    code = "WORLD_ERROR"


class WorldUnavailableError(WorldError):
    """The store cannot be reached, read or written (locked, unreadable, server down)."""

    code = "WORLD_UNAVAILABLE"


class WorldStorageFullError(WorldUnavailableError):
    """The store refused a write for want of space: the SQLite file's filesystem is full
    (``SQLITE_FULL``, ``ENOSPC``), or JetStream's file store is at its limit (the server's
    ``max_file_store``: err_code 10023 "insufficient resources", or 10047 for a stream's
    reservation). Nothing of the refused write is stored. It is an unavailability, not a
    failure of the run: the worker handles the delivery again, backing off, without spending
    the run's delivery budget, and every run moves on once space is freed (a NATS server whose
    own filesystem filled needs a restart as well; ``docs/durability.md``, "A full disk")."""

    code = "STORE_FULL"


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
    """A hook's token is held by another active hook. ``holder`` is the run whose hook holds
    it. (A claim contended past its retries is not a conflict: the world raises
    :class:`WorldUnavailableError`, and the worker tries the delivery again.)"""

    code = "HOOK_TOKEN_CONFLICT"

    def __init__(
        self, message: str, *, token: str, holder: str | None = None, **details: Any
    ) -> None:
        super().__init__(message, token=token, holder=holder, **details)
        self.token = token
        self.holder = holder

    @classmethod
    def held_by(cls, token: str, holder: str, run_id: str) -> HookTokenConflictError:
        """``run_id`` wanted ``token``, which an active hook of run ``holder`` holds."""
        whose = f"run {holder}" + (" (this run)" if holder == run_id else "")
        message = f"hook token {token!r} is held by another active hook, of {whose}"
        return cls(message, token=token, holder=holder)


class CorruptEntryError(WorldError):
    """A stored entry the world reads does not decode as anything Wayline writes (foreign or
    damaged bytes in a hook or idempotency bucket, a queue subject, a table row). Never retried:
    the same bytes fail the same way. ``store`` names where, ``key`` which entry, ``why`` what
    is wrong with it."""

    code = "CORRUPT_ENTRY"

    def __init__(self, message: str, *, store: str, key: str, why: str, **details: Any) -> None:
        super().__init__(message, store=store, key=key, why=why, **details)
        self.store = store
        self.key = key
        self.why = why


class CorruptLogError(CorruptEntryError):
    """An entry of a run's event log does not decode, or does not follow from the entries
    before it. The run is fenced (shown ``corrupt``), its deliveries are set aside, other runs
    are untouched; ``wayline runs repair RUN_ID --drop-seq SEQ`` removes the entry."""

    code = "CORRUPT_LOG"

    def __init__(
        self, run_id: str, seq: int, why: str, *, store: str = "event log", drop: bool = True
    ) -> None:
        repair = f"wayline runs repair {run_id}" + (f" --drop-seq {seq}" if drop else "")
        super().__init__(
            f"run {run_id}: {store} entry {seq} is unreadable ({why}); `{repair}` "
            + ("removes it" if drop else "rebuilds it from the run's events"),
            store=store,
            key=f"{run_id}@{seq}",
            why=why,
            run_id=run_id,
            seq=seq,
        )
        self.run_id = run_id
        self.seq = seq


class BlobMissingError(CorruptLogError):
    """An event of a run's log refers to an out-of-line payload (a blob) that its store does
    not hold, or holds with other bytes. Fenced like any unreadable entry (``CORRUPT_LOG``);
    nothing can rebuild the payload, so the run is repaired by restoring the blob or deleted."""

    def __init__(self, run_id: str, seq: int, why: str, *, store: str) -> None:
        CorruptEntryError.__init__(
            self,
            f"run {run_id}: event {seq} refers to an out-of-line payload that is unreadable "
            f"({why}) in {store}; restore it there, or delete the run",
            store=store,
            key=f"{run_id}@{seq}",
            why=why,
            run_id=run_id,
            seq=seq,
        )
        self.run_id = run_id
        self.seq = seq


class PayloadTooLargeError(SerializationError):
    """A value is over its size limit (see ``Settings``): refused before anything is written.
    For a step's result it fails the step (a ``FatalError``: no automatic retries; the
    workflow can catch the step's failure and decide)."""

    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, what: str, size: int, limit: int, setting: str) -> None:
        SerializationError.__init__(
            self,
            f"{what} is {size} bytes, over the limit of {limit} bytes ({setting})",
            what=what,
            size=size,
            limit=limit,
            setting=setting,
        )
        self.size = size
        self.limit = limit
