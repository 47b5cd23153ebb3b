"""What a ``WorkflowSchedule`` does at one look, pure: from its spec, the time, and the
WorkflowRuns it owns, which tick to start, which live runs to cancel (Replace), which finished
runs to delete (history limits), and what to say. The tick (``schedule_handlers``)
carries it out.

Exactly once per tick without any lock: a tick's WorkflowRun is named after it
(``<schedule>-<unix minute>``), so every operator replica, or one restarted mid-tick, that
plans the same tick creates the same name and the API server refuses the second
(AlreadyExists). Only runs of *earlier* ticks count as live for Forbid and Replace, so a
second planner never cancels or waits for the run the first one just made for this tick.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wayline.cron import Cron, due, next_tick

from .instance import LABEL as INSTANCE_LABEL
from .schedule_resource import WorkflowScheduleSpec
from .status import stamp

TICK_LABEL = "wayline.dev/tick"
"""The run's tick, in whole minutes since the epoch (a label: ``kubectl get -l``)."""
SCHEDULE_LABEL = "wayline.dev/schedule-uid"
"""The owning schedule's uid (a name may be longer than a label value allows)."""
STAMP = "%Y-%m-%dT%H:%M:%SZ"
SUCCEEDED, FAILED = {"completed"}, {"failed", "cancelled", "invalid"}


@dataclass(frozen=True, slots=True)
class OwnedRun:
    name: str
    tick: float
    phase: str | None  # None: the operator has not started it yet

    @property
    def live(self) -> bool:
        return self.phase not in SUCCEEDED | FAILED


@dataclass(frozen=True, slots=True)
class Plan:
    create: float | None = None
    """The tick whose run to create now."""
    cancel: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    next: float | None = None
    skipped: str | None = None
    """Why a due tick starts nothing (Forbid), for an Event and ``status.message``."""


def run_name(schedule: str, tick: float) -> str:
    return f"{schedule}-{int(tick) // 60}"


MAX_NAME = 253
"""The longest name the API server takes for a WorkflowRun (a DNS subdomain)."""


def name_problem(schedule: str, now: float) -> str | None:
    """Why a schedule's name cannot name its runs (``<schedule>-<minute>`` is too long), or
    None. Without it every tick's create was refused (422) and the timer failed for good."""
    longest = MAX_NAME - len(run_name("", now))
    if len(schedule) <= longest:
        return None
    return (
        f"metadata.name: {len(schedule)} characters leave no room for its runs' names "
        f"(<name>-<minute>, {MAX_NAME} characters at most): use at most {longest}"
    )


def owned_run(body: Mapping[str, Any]) -> OwnedRun | None:
    """A WorkflowRun as the planner sees it, None if it has no readable tick label."""
    meta = body.get("metadata") or {}
    label = (meta.get("labels") or {}).get(TICK_LABEL, "")
    if not str(label).isdigit():
        return None
    phase = (body.get("status") or {}).get("phase")
    return OwnedRun(str(meta.get("name")), int(label) * 60.0, phase)


def since(status: Mapping[str, Any], created: str | None, runs: Sequence[OwnedRun]) -> float:
    """The tick the schedule has handled up to: the latest of its recorded last tick, its
    runs' ticks and its creation (a status write lost to a crash is made up by the runs)."""
    found = [r.tick for r in runs]
    for text in (status.get("lastScheduleTime"), created):
        if isinstance(text, str):
            with contextlib.suppress(ValueError):
                found.append(datetime.strptime(text, STAMP).replace(tzinfo=UTC).timestamp())
    return max(found, default=0.0)


def plan(
    spec: WorkflowScheduleSpec,
    cron: Cron,
    handled: float,
    now: float,
    runs: Sequence[OwnedRun],
) -> Plan:
    deletes = _history(spec, runs)
    # no tick at or before the handled one starts (``due``), so the next is after both: the
    # handled tick can be ahead of ``now`` (the clock set back, a replica's clock behind)
    nxt = next_tick(cron, max(now, handled))
    deadline = spec.startingDeadlineSeconds
    tick = None if spec.suspend else due(cron, handled, now, deadline)
    if tick is None:
        return Plan(delete=deletes, next=nxt)
    earlier = [r for r in runs if r.live and r.tick < tick]
    if earlier and spec.concurrencyPolicy == "Forbid":
        names = ", ".join(r.name for r in earlier)
        skipped = f"tick {stamp(tick)} skipped: Forbid, and {names} is still running"
        return Plan(delete=deletes, next=nxt, skipped=skipped)
    cancel = [r.name for r in earlier] if spec.concurrencyPolicy == "Replace" else []
    return Plan(create=tick, cancel=cancel, delete=deletes, next=nxt)


def _history(spec: WorkflowScheduleSpec, runs: Sequence[OwnedRun]) -> list[str]:
    """Finished runs beyond the history limits, oldest first; never the run of the newest
    tick, even under a limit of 0: it is what :func:`since` knows the tick was handled by
    when the status write that recorded it was lost (a crash), and deleting it would free
    its name for a second run of the same tick."""
    newest = max(runs, key=lambda r: r.tick, default=None)
    out: list[str] = []
    for phases, keep in (
        (SUCCEEDED, spec.successfulRunsHistoryLimit),
        (FAILED, spec.failedRunsHistoryLimit),
    ):
        done = sorted((r for r in runs if r.phase in phases), key=lambda r: r.tick)
        out += [r.name for r in done[: max(0, len(done) - keep)] if r is not newest]
    return out


def run_manifest(
    schedule: Mapping[str, Any], spec: WorkflowScheduleSpec, tick: float
) -> dict[str, Any]:
    """The tick's WorkflowRun: owned by the schedule (deleted with it by the garbage
    collector), labelled with the tick and the schedule's uid, and with the schedule's
    operator instance if it has one (the run then has the schedule's owner)."""
    meta = schedule["metadata"]
    owner = (meta.get("labels") or {}).get(INSTANCE_LABEL)
    labels = {SCHEDULE_LABEL: meta["uid"], TICK_LABEL: str(int(tick) // 60)}
    return {
        "apiVersion": schedule["apiVersion"],
        "kind": "WorkflowRun",
        "metadata": {
            "name": run_name(meta["name"], tick),
            "namespace": meta["namespace"],
            "labels": labels | ({} if owner is None else {INSTANCE_LABEL: owner}),
            "annotations": {"wayline.dev/scheduled-time": stamp(tick)},
            "ownerReferences": [
                {
                    "apiVersion": schedule["apiVersion"],
                    "kind": schedule["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"workflow": spec.workflow} | ({} if spec.input is None else {"input": spec.input}),
    }
