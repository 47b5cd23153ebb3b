"""The tick of ``WorkflowSchedule``: every ``WAYLINE_OPERATOR_SCHEDULE_SECONDS`` it looks at
each schedule the watch shows (``periodic``: no kopf timer, so no finalizer), lists the
schedule's WorkflowRuns (by the owner's uid label), asks the pure planner (``schedules.plan``)
what to do, does it (create the tick's run, cancel a replaced one, delete history beyond the
limits) and writes the status when it changed. The WorkflowRuns it creates are started by the
``start`` handler like any other, so a run's start stays in one place. An invalid spec (cron,
time zone) is a ``Ready=False`` condition and one Warning Event ``InvalidSpec``, looked at
again at every tick (a fixed spec recovers)."""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import kopf
import pydantic

from wayline.cron import CronError, parse

from .announce import first_error, post
from .config import settings
from .instance import current
from .kube import (
    create_run,
    delete,
    exists,
    list_runs,
    patch_run,
    patch_status,
    read_run,
    release_legacy,
)
from .metrics import observed
from .notices import NORMAL, WARNING, Notice
from .peering import GATE
from .periodic import Periodic
from .resource import GROUP, VERSION
from .schedule_resource import SCHEDULE_PLURAL, WorkflowScheduleSpec
from .schedules import (
    SCHEDULE_LABEL,
    OwnedRun,
    Plan,
    name_problem,
    owned_run,
    plan,
    run_manifest,
    run_name,
    since,
)
from .status import stamp

log = logging.getLogger("wayline.operator")
SETTINGS = settings()


def _ready(
    status: Mapping[str, Any],
    ok: bool,
    reason: str,
    message: str,
    now: float,
    generation: int | None = None,
) -> dict[str, Any]:
    """The ``Ready`` condition, keeping its transition time while its status stays, for the
    spec's ``generation`` (KEP-1623)."""
    value = "True" if ok else "False"
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    before = next((c for c in conditions if c.get("type") == "Ready"), {})
    moved = before.get("status") != value
    return {
        "type": "Ready",
        "status": value,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": stamp(now) if moved else before.get("lastTransitionTime"),
    }


async def _write(
    meta: Mapping[str, Any], status: Mapping[str, Any], fresh: Mapping[str, Any]
) -> None:
    if any(status.get(k) != v for k, v in fresh.items()):
        namespace, name = str(meta["namespace"]), str(meta["name"])
        await patch_status(namespace, name, fresh, SCHEDULE_PLURAL)


@kopf.on.startup(id="schedules")
async def startup(memo: kopf.Memo, **_: Any) -> None:
    memo["schedules"] = Periodic(
        "tick",
        SETTINGS.operator_schedule_seconds,
        tick,
        lambda: GATE.paused,
        functools.partial(exists, plural=SCHEDULE_PLURAL),
    )


@kopf.on.cleanup(id="schedules")
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    schedules: Periodic | None = memo.get("schedules")
    if schedules is not None:
        await schedules.close()


@kopf.on.event(GROUP, VERSION, SCHEDULE_PLURAL, id="schedule-seen")
async def seen(event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Every watch event of a WorkflowSchedule: one of this operator's (``instance``) joins the
    ticks, one deleted or being deleted leaves them; the legacy finalizer of an owned one is
    taken off."""
    schedules: Periodic = memo["schedules"]
    schedules.start()  # from inside a handler: its looks inherit what kopf.event needs
    owned = current().owns(body)
    schedules.seen(event.get("type"), copy.deepcopy(dict(body)) if owned else body, owned)
    if owned:
        await release_legacy(event.get("type"), body.get("metadata") or {}, SCHEDULE_PLURAL)


@observed("tick")
async def tick(body: Mapping[str, Any], kept: Callable[[], bool]) -> None:
    """One look at a schedule. ``kept`` says whether the watch still shows it: a look under
    way when the schedule is deleted creates no run after that (one created just before is
    the schedule's, deleted with it by the garbage collector: its owner reference)."""
    meta: Mapping[str, Any] = body["metadata"]
    spec: Mapping[str, Any] = body.get("spec") or {}
    status: Mapping[str, Any] = body.get("status") or {}
    now = SETTINGS.schedule_now()
    generation = meta.get("generation")
    try:
        parsed = WorkflowScheduleSpec.model_validate(dict(spec))
        cron = parse(parsed.schedule, parsed.timeZone)
        message = name_problem(str(meta["name"]), now)
    except (pydantic.ValidationError, CronError) as err:
        message = str(err).splitlines()[0] if isinstance(err, CronError) else first_error(err)
    if message is not None:
        if status.get("message") != message:
            post(body, [Notice(WARNING, "InvalidSpec", message)])
        ready = _ready(status, False, "InvalidSpec", message, now, generation)
        invalid = {"message": message, "conditions": [ready], "nextScheduleTime": None}
        await _write(meta, status, {**invalid, "observedGeneration": generation})
        return
    namespace, name = str(meta["namespace"]), str(meta["name"])
    items = await list_runs(namespace, f"{SCHEDULE_LABEL}={meta['uid']}")
    runs = [r for r in (owned_run(i) for i in items) if r is not None]
    handled = since(status, meta.get("creationTimestamp"), runs)
    todo = plan(parsed, cron, handled, now, runs)
    # a spec fixed since its last tick: its error is not what happened at the last tick
    kept_status = {**status, "message": None} if _invalid(status) else status
    said, todo = await _carry_out(body, parsed, todo, namespace, name, kept_status, kept)
    fresh = _status(name, kept_status, parsed, todo, runs, said, now, generation)
    await _write(meta, status, fresh)


def _invalid(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("reason") == "InvalidSpec" for c in conditions)


async def _carry_out(
    body: Mapping[str, Any],
    spec: WorkflowScheduleSpec,
    todo: Plan,
    namespace: str,
    name: str,
    status: Mapping[str, Any],
    kept: Callable[[], bool],
) -> tuple[str | None, Plan]:
    """Do the plan; what to say in ``status.message``, and the plan as done (without its
    creation when the tick's run name is another's WorkflowRun)."""
    for old in todo.cancel:  # Replace: the live run stops (its compensations run) first
        await patch_run(namespace, old, {"spec": {"cancel": True}})
        post(body, [Notice(NORMAL, "Replaced", f"cancelled {old}: Replace")])
    for old in todo.delete:
        await delete(namespace, old)
    if todo.skipped is not None:
        if status.get("message") != todo.skipped:
            post(body, [Notice(NORMAL, "Skipped", todo.skipped)])
        return todo.skipped, todo
    if todo.create is None or not kept():
        return status.get("message"), replace(todo, create=None)
    run = run_name(name, todo.create)
    if await create_run(namespace, run_manifest(body, spec, todo.create)):
        post(body, [Notice(NORMAL, "Started", f"started {run} for {stamp(todo.create)}")])
        return f"started {run}", todo
    # AlreadyExists: this tick's run made before (another replica, a restart before the status
    # write), or a WorkflowRun someone else named so, which is not this tick's run to claim
    taken = await read_run(namespace, run)
    labels = ((taken or {}).get("metadata") or {}).get("labels") or {}
    if taken is None or labels.get(SCHEDULE_LABEL) == body["metadata"]["uid"]:
        return f"started {run}", todo
    said = (
        f"tick {stamp(todo.create)} not started: the WorkflowRun {run} exists and is not "
        "this schedule's (its name is the one the tick's run takes)"
    )
    if status.get("message") != said:
        post(body, [Notice(WARNING, "NameTaken", said)])
    return said, replace(todo, create=None)


def _status(
    name: str,
    status: Mapping[str, Any],
    spec: WorkflowScheduleSpec,
    todo: Plan,
    runs: Sequence[OwnedRun],
    message: str | None,
    now: float,
    generation: int | None = None,
) -> dict[str, Any]:
    ticks = [r.tick for r in runs] + ([todo.create] if todo.create is not None else [])
    last = max(ticks, default=None)
    active = sorted({r.name for r in runs if r.live and r.name not in todo.cancel})
    if todo.create is not None:
        active = sorted({*active, run_name(name, todo.create)})
    reason = "Suspended" if spec.suspend else "Scheduling"
    return {
        "lastScheduleTime": stamp(last) if last is not None else status.get("lastScheduleTime"),
        "lastRun": run_name(name, last) if last is not None else status.get("lastRun"),
        "nextScheduleTime": None if spec.suspend else stamp(todo.next),
        "active": active or None,
        "message": message,
        "observedGeneration": generation,
        "conditions": [_ready(status, True, reason, message or reason, now, generation)],
    }
