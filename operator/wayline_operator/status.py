"""A ``WorkflowRun``'s status as a mirror of its run's log. Pure: unit-tested without a
cluster; the handlers write what it returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from wayline._core.events import Event, RunStatus
from wayline._core.projections import fold
from wayline.world import RunInfo

_DONE = {RunStatus.COMPLETED: "Succeeded", RunStatus.FAILED: "Failed"}


def stamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def step_counts(events: Sequence[Event]) -> dict[str, int]:
    """Forward steps created, and steps completed and failed, from the one fold of the log."""
    return fold("", events).step_counts()


def resumes_recorded(events: Sequence[Event]) -> int:
    return fold("", events).compensation_resumes


def run_status(info: RunInfo, events: Sequence[Event]) -> dict[str, Any]:
    """The status fields that mirror the run (kopf's own keys live beside them)."""
    view = fold(info.run_id, events)
    status: dict[str, Any] = {
        "runId": info.run_id,
        "phase": str(info.status),
        "lastSeq": info.last_seq,
        "steps": view.step_counts(),
        "compensationResumes": view.compensation_resumes,
        "createdAt": stamp(info.created_at),
        "startedAt": stamp(info.started_at),
        "endedAt": stamp(info.ended_at),
        "output": info.output if info.status is RunStatus.COMPLETED else None,
        "error": _error(info.error) if info.status is not RunStatus.COMPLETED else None,
    }
    status["conditions"] = [_condition(info)]
    return status


def _error(error: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not error:
        return None
    return {k: error[k] for k in ("code", "message", "name") if error.get(k) is not None}


def _condition(info: RunInfo) -> dict[str, Any]:
    """``Succeeded``: True when completed, False when failed or cancelled, Unknown while live
    (with the live phase as its reason)."""
    if info.status.terminal:
        ok = info.status is RunStatus.COMPLETED
        reason = _DONE.get(info.status, "Cancelled")
        message = "" if ok else str((info.error or {}).get("message", ""))
        return {
            "type": "Succeeded",
            "status": "True" if ok else "False",
            "reason": reason,
            "message": message[:1024],
            "lastTransitionTime": stamp(info.ended_at),
        }
    reason = "".join(part.capitalize() for part in str(info.status).split("_"))
    message = ""
    if info.status is RunStatus.BLOCKED:
        message = str((info.error or {}).get("message", ""))
    elif info.status is RunStatus.COMPENSATION_STUCK:
        message = "a compensation failed: raise spec.compensation.resumes or set abandon"
    return {
        "type": "Succeeded",
        "status": "Unknown",
        "reason": reason,
        "message": message[:1024],
        "lastTransitionTime": stamp(info.updated_at),
    }


def invalid_status(message: str) -> dict[str, Any]:
    """The status of a resource whose spec cannot start a run (nothing was started)."""
    return {
        "phase": "invalid",
        "conditions": [
            {
                "type": "Succeeded",
                "status": "False",
                "reason": "InvalidSpec",
                "message": message[:1024],
                "lastTransitionTime": stamp(datetime.now(UTC).timestamp()),
            }
        ],
    }
