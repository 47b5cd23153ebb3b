"""The ``WorkflowSchedule`` resource (Argo's CronWorkflow, Temporal's Schedules): its spec and
status as pydantic models, and the CRD generated from them (``resource.crds`` lists it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .resource import Condition, _crd, _schema, status_schema

SCHEDULE_KIND = "WorkflowSchedule"
SCHEDULE_PLURAL = "workflowschedules"


class WorkflowScheduleSpec(BaseModel):
    """Start a WorkflowRun of ``workflow`` at every tick of ``schedule``, exactly once per
    tick: the run is named after its tick (``<schedule>-<unix minute>``)."""

    model_config = ConfigDict(extra="forbid")

    schedule: str = Field(
        min_length=1,
        description="A 5-field cron expression (minute hour day-of-month month day-of-week; "
        "ranges, steps, lists, names) or @hourly, @daily, @weekly, @monthly, @yearly.",
    )
    timeZone: str = Field(
        default="UTC",
        description="The IANA time zone the schedule is read in (Europe/Berlin). A wall time "
        "skipped by daylight saving runs right after the jump; one repeated runs once.",
    )
    workflow: str = Field(
        min_length=1, description="The workflow's registered name (@wayline.workflow)."
    )
    input: Any = Field(default=None, description="The runs' input, as a WorkflowRun's spec.input.")
    concurrencyPolicy: Literal["Allow", "Forbid", "Replace"] = Field(
        default="Allow",
        description="A tick while an earlier run is live: Allow starts another, Forbid skips "
        "the tick, Replace cancels the live run (spec.cancel) and starts the new one.",
    )
    startingDeadlineSeconds: int | None = Field(
        default=None,
        ge=0,
        description="A tick found this many seconds late (the operator was down) is skipped. "
        "Of several missed ticks only the latest runs, as a CronJob's.",
    )
    successfulRunsHistoryLimit: int = Field(
        default=3, ge=0, description="Completed WorkflowRuns kept; older ones are deleted."
    )
    failedRunsHistoryLimit: int = Field(
        default=1,
        ge=0,
        description="Failed or cancelled WorkflowRuns kept; older ones are deleted.",
    )
    suspend: bool = Field(
        default=False,
        description="No ticks while true; on resume the latest missed tick runs if it is "
        "within startingDeadlineSeconds (as a CronJob's).",
    )


class WorkflowScheduleStatus(BaseModel):
    """Written by the operator only."""

    lastScheduleTime: str | None = Field(default=None, description="The latest tick run.")
    nextScheduleTime: str | None = Field(default=None, description="The next tick.")
    lastRun: str | None = Field(default=None, description="The WorkflowRun of the latest tick.")
    active: list[str] | None = Field(default=None, description="Its live WorkflowRuns.")
    message: str | None = Field(default=None, description="What happened at the last tick.")
    observedGeneration: int | None = Field(
        default=None, description="The metadata.generation this status was computed for."
    )
    conditions: list[Condition] | None = Field(
        default=None, description="Ready (the spec schedules) and Suspended."
    )


def schedule_crd_manifest() -> dict[str, Any]:
    """The ``WorkflowSchedule`` CRD."""
    columns: list[dict[str, Any]] = [
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
        {"name": "Time-Zone", "type": "string", "jsonPath": ".spec.timeZone", "priority": 1},
        {"name": "Workflow", "type": "string", "jsonPath": ".spec.workflow"},
        {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
        {"name": "Last", "type": "date", "jsonPath": ".status.lastScheduleTime"},
        {"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    ]
    spec = _schema(WorkflowScheduleSpec)
    # Unknown fields are kept, not pruned, so that the admission policy refuses a typo for
    # every client (``resource.input_policy``): pruned, a client that asks for no strict field
    # validation (the Python client) had ``schedul:`` or ``inputs:`` dropped in silence.
    spec["x-kubernetes-preserve-unknown-fields"] = True
    return _crd(
        SCHEDULE_KIND,
        SCHEDULE_PLURAL,
        "wfs",
        spec,
        columns,
        status_schema(WorkflowScheduleStatus),
    )
