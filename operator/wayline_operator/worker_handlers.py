"""The look at each ``WorkflowWorker``: every ``WAYLINE_OPERATOR_WORKER_SECONDS`` it lists the
worker's Deployments (by its uid label), asks the world what each version's workers serve, the
live runs with the identity each is pinned to, and the current version's backlog; the pure
planner (``worker_versions.plan``) says what to create, scale and delete; this module does it,
posts the Events and writes the status when it changed. Like schedules, it runs from the
watch (``periodic``), so no finalizer: the Deployments are owned by the WorkflowWorker and the
garbage collector deletes them with it."""

from __future__ import annotations

import copy
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import pydantic

from wayline import RunStatus, World
from wayline.world.registry import version_identities, version_topics

from .announce import first_error, post
from .config import settings
from .deployments import (
    OWNER_LABEL,
    TEMPLATE_ANNOTATION,
    VERSION_LABEL,
    deployment,
    deployment_name,
    draining_template,
    is_draining,
    template_hash,
)
from .instance import current
from .kube import (
    annotate_pod,
    create_deployment,
    delete_deployment,
    exists,
    list_deployments,
    list_pods,
    patch_status,
    replace_template,
    scale_deployment,
)
from .metrics import WORKER_BACKLOG, WORKER_DUE_SOON, observed
from .notices import WARNING, Notice
from .peering import GATE
from .periodic import Periodic
from .pod_costs import DELETION_COST, pod_costs
from .resource import GROUP, VERSION
from .status import seconds_of, stamp
from .worker_resource import WORKER_PLURAL, WorkflowWorkerSpec
from .worker_versions import Deployed, LiveRun, Plan, Seen, plan, version_of

log = logging.getLogger("wayline.operator")
SETTINGS = settings()
LIVE = (
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.BLOCKED,
    RunStatus.PAUSED,
    RunStatus.COMPENSATING,
    RunStatus.COMPENSATION_STUCK,
)
LIVE_RUNS_READ = 100_000
"""Live runs read per status at each look: enough for any backlog a worker drains, and a
bound on what one look holds in memory."""


@kopf.on.startup(id="workers")
async def startup(memo: kopf.Memo, **_: Any) -> None:
    memo["workers"] = Periodic(
        "worker",
        SETTINGS.operator_worker_seconds,
        functools.partial(look, memo),
        lambda: GATE.paused,
        functools.partial(exists, plural=WORKER_PLURAL),
    )


@kopf.on.cleanup(id="workers")
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    workers: Periodic | None = memo.get("workers")
    if workers is not None:
        await workers.close()


@kopf.on.event(GROUP, VERSION, WORKER_PLURAL, id="worker-seen")
async def seen(event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Every watch event of a WorkflowWorker: one of this operator's joins the looks."""
    workers: Periodic = memo["workers"]
    workers.start()  # from inside a handler: its looks inherit what kopf.event needs
    owned = current().owns(body)
    workers.seen(event.get("type"), copy.deepcopy(dict(body)) if owned else body, owned)


async def live_runs(world: World) -> list[LiveRun]:
    """Every live run pinned to a definition identity (a run not pinned yet goes to whichever
    worker serves its workflow, so no version holds it)."""
    out: list[LiveRun] = []
    for status in LIVE:
        for info in await world.list_runs(status=status, limit=LIVE_RUNS_READ):
            pin = info.attributes.get("definition")
            identity = pin.get("identity") if isinstance(pin, Mapping) else None
            if isinstance(identity, str):
                out.append(LiveRun(info.run_id, identity))
    return out


@observed("worker")
async def look(memo: kopf.Memo, body: Mapping[str, Any], kept: Callable[[], bool]) -> None:
    """One look at a WorkflowWorker (``kept``: the watch still shows it; a look under way when
    it is deleted creates no Deployment after that)."""
    reconciler = memo.get("reconciler")
    if reconciler is None:  # the world is not open yet: the next look tries again
        return
    world: World = reconciler.world
    meta: Mapping[str, Any] = body["metadata"]
    status: Mapping[str, Any] = body.get("status") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    generation = meta.get("generation")
    try:
        spec = WorkflowWorkerSpec.model_validate(dict(body.get("spec") or {}))
    except pydantic.ValidationError as err:
        message = first_error(err)
        if status.get("message") != message:
            post(body, [Notice(WARNING, "InvalidSpec", message)])
        await _write(meta, status, {"message": message, "observedGeneration": generation})
        return
    version = version_of(spec)
    items = await list_deployments(namespace, f"{OWNER_LABEL}={meta['uid']}")
    deployed: dict[str, Deployed] = {}
    written: dict[str, str | None] = {}
    templates: dict[str, Mapping[str, Any]] = {}
    for item in items:
        label = ((item.get("metadata") or {}).get("labels") or {}).get(VERSION_LABEL)
        if isinstance(label, str):
            annotations = (item.get("metadata") or {}).get("annotations") or {}
            written[label] = annotations.get(TEMPLATE_ANNOTATION)
            templates[label] = (item.get("spec") or {}).get("template") or {}
            deployed[label] = Deployed(
                int((item.get("spec") or {}).get("replicas") or 0),
                int((item.get("status") or {}).get("readyReplicas") or 0),
                is_draining(templates[label]),
            )
    rows = {str(r.get("name")): r for r in status.get("versions") or [] if isinstance(r, Mapping)}
    served = await world.list_served()
    serving = version_identities(served, world.now())
    remembered = (rows.get(version) or {}).get("topics") or []
    topics = sorted({*version_topics(served, version, world.now()), *remembered})
    backlog = sum((await world.ready_messages(topics)).values()) if topics else 0
    in_flight = sum((await world.in_flight_messages(topics)).values()) if topics else 0
    WORKER_BACKLOG.labels(namespace, name).set(backlog)
    now = world.now()
    ahead = await world.delayed_messages(topics, now + spec.lead_seconds) if topics else {}
    due_soon = sum(ahead.values())
    WORKER_DUE_SOON.labels(namespace, name).set(due_soon)
    todo = plan(
        spec,
        Seen(
            current=version,
            deployed=deployed,
            rows=rows,
            serving=serving,
            runs=await live_runs(world),
            backlog=backlog,
            in_flight=in_flight,
            due_soon=due_soon,
            topics=topics,
            now=now,
            last_scale=seconds_of(status.get("lastScaleTime")),
        ),
    )
    if not kept():
        return
    await _cost_pods(world, body, todo, deployed)
    await _carry_out(body, spec, version, todo, templates)
    if version in deployed:
        await _roll_in_place(body, spec, version, written.get(version))
    post(body, todo.notices)
    fresh = {
        "current": version,
        "versions": todo.rows,
        "versionCount": len(todo.rows),
        "readyReplicas": sum(int(r.get("readyReplicas") or 0) for r in todo.rows),
        "pinnedRuns": sum(int(r.get("pinnedRuns") or 0) for r in todo.rows),
        "backlog": backlog,
        "inFlight": in_flight,
        "dueSoon": due_soon,
        "selector": f"{OWNER_LABEL}={meta['uid']},{VERSION_LABEL}={version}",
        "lastScaleTime": stamp(now) if todo.scaled else status.get("lastScaleTime"),
        "message": None,
        "observedGeneration": generation,
    }
    await _write(meta, status, fresh)


async def _carry_out(
    body: Mapping[str, Any],
    spec: WorkflowWorkerSpec,
    version: str,
    todo: Plan,
    templates: Mapping[str, Mapping[str, Any]],
) -> None:
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    if todo.create is not None:
        await create_deployment(deployment(body, spec, version, todo.create))
    for old in todo.drain:
        # The drained template's hash is written too: should this version become current
        # again (a rollback), its template from the spec differs and is written back over it
        # (``_roll_in_place``), which takes the drain off.
        drained = draining_template(templates[old])
        digest = template_hash({"spec": {"template": drained}})
        await replace_template(namespace, deployment_name(name, old), drained, digest)
    for old, replicas in todo.scale.items():
        await scale_deployment(namespace, deployment_name(name, old), replicas)
    for old in todo.delete:
        await delete_deployment(namespace, deployment_name(name, old))


async def _cost_pods(
    world: World, body: Mapping[str, Any], todo: Plan, deployed: Mapping[str, Deployed]
) -> None:
    """Before a version's Deployment is scaled down, each of its pods gets the deliveries its
    workers hold as its deletion cost (``pod_costs``), so the ReplicaSet removes idle pods
    first. The registry is read again here, right before the scale, rather than taken from the
    look's start. Only a changed cost is written. The order is a preference, not a condition:
    should it fail (the operator's role lacks pods/patch after an upgrade of the operator
    alone, say), the scale-down goes ahead with the ReplicaSet's own choice, as before."""
    down = [v for v, n in todo.scale.items() if v in deployed and n < deployed[v].replicas]
    if not down:
        return
    meta = body["metadata"]
    namespace = str(meta["namespace"])
    try:
        held = await world.held_deliveries(world.now())
        for version in down:
            selector = f"{OWNER_LABEL}={meta['uid']},{VERSION_LABEL}={version}"
            pods = {
                str(p["metadata"]["name"]): p["metadata"].get("annotations") or {}
                for p in await list_pods(namespace, selector)
                if not p["metadata"].get("deletionTimestamp")
            }
            for pod, cost in pod_costs(pods, held).items():
                if pods[pod].get(DELETION_COST) != str(cost):
                    await annotate_pod(namespace, pod, {DELETION_COST: str(cost)})
    except Exception as err:  # the ReplicaSet's own choice is still a correct scale-down
        log.warning(
            "could not order the pods of %s/%s for a scale-down: %s", namespace, meta["name"], err
        )


async def _roll_in_place(
    body: Mapping[str, Any], spec: WorkflowWorkerSpec, version: str, written: str | None
) -> None:
    """The current version's pod template as the spec now makes it, written over its
    Deployment when it differs (resources, probes, volumes: not part of the version)."""
    made = deployment(body, spec, version, 0)
    digest = template_hash(made)
    if digest != written:
        meta = body["metadata"]
        name = deployment_name(str(meta["name"]), version)
        await replace_template(str(meta["namespace"]), name, made["spec"]["template"], digest)


async def _write(
    meta: Mapping[str, Any], status: Mapping[str, Any], fresh: Mapping[str, Any]
) -> None:
    if any(status.get(k) != v for k, v in fresh.items()):
        await patch_status(str(meta["namespace"]), str(meta["name"]), fresh, WORKER_PLURAL)
