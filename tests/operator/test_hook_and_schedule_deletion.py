"""Deleting WorkflowHooks and WorkflowSchedules on a real kube-apiserver + etcd, on both worlds.
Neither carries a finalizer, so with no operator (as after ``helm uninstall``) a delete
completes at once; a schedule deleted while its operator was down starts nothing once the
operator is back; the finalizers earlier versions put on them are taken off; and a delete
with the operator running costs no refused write."""

# ruff: noqa: F811 - the fixtures imported from test_workflowschedule are parameters here

from __future__ import annotations

import asyncio
import functools
import json
import signal
from typing import Any

import wayline
from tests.operator.test_scale import requests
from tests.operator.test_workflowrun import Cluster
from tests.operator.test_workflowschedule import (  # noqa: F401 - fixtures
    SCHEDULE_APPS,
    _schedule,
    cluster,
    schedule_crds,
)
from tests.runtime.harness import settings, wait_for
from wayline._core.events import RunStatus
from wayline_operator.instance import DEFAULT_INSTANCE, LEGACY_FINALIZER, finalizer_for

EARLIER = [LEGACY_FINALIZER, finalizer_for(DEFAULT_INSTANCE)]
"""What earlier versions put on a waiting hook and a schedule: the finalizer every operator
shared, then the instance's own (the test's operator is the default instance)."""


def _hook(token: str) -> dict[str, Any]:
    return {"token": token, "payload": {"ok": True}}  # no run holds the token: it waits


def _meta(cluster: Cluster, kind: str, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = cluster.get(name, kind)["metadata"]
    return meta


def _runs_of(cluster: Cluster, uid: str) -> list[str]:
    done = cluster.kubectl("get", "wfr", "-l", f"wayline.dev/schedule-uid={uid}", "-o", "json")
    return sorted(i["metadata"]["name"] for i in json.loads(done.stdout)["items"])


async def _ticked(cluster: Cluster, uid: str, n: int) -> list[str]:
    async def enough() -> list[str] | None:
        runs = await asyncio.to_thread(_runs_of, cluster, uid)
        return runs if len(runs) >= n else None

    found: list[str] = await wait_for(enough, timeout=30, interval=0.3)
    return found


def _deleted_at_once(cluster: Cluster, kind: str, name: str) -> None:
    deleted = cluster.kubectl("delete", kind, name, "--timeout=15s", check=False)
    assert deleted.returncode == 0, deleted.stderr
    gone = cluster.kubectl("get", kind, name, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def _create(cluster: Cluster, kind: str, name: str, spec: dict[str, Any], **meta: Any) -> None:
    body = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, **meta},
        "spec": spec,
    }
    done = cluster.plane.kubectl(
        "-n", cluster.namespace, "create", "-f", "-", input=json.dumps(body)
    )
    assert done.returncode == 0, done.stderr


async def test_with_no_operator_a_hook_and_a_schedule_delete_at_once(cluster: Cluster) -> None:
    assert cluster.apply("early", _hook("tok-nobody"), "WorkflowHook").returncode == 0
    assert cluster.apply("every", _schedule(), "WorkflowSchedule").returncode == 0
    await cluster.status_when("early", "waiting", kind="workflowhook")
    uid = _meta(cluster, "wfs", "every")["uid"]
    await _ticked(cluster, uid, 1)
    # with the operator running neither carries a finalizer (kopf added one for its timers)
    assert _meta(cluster, "wfh", "early").get("finalizers") is None
    assert _meta(cluster, "wfs", "every").get("finalizers") is None
    cluster.operator.stop()  # as after helm uninstall
    _deleted_at_once(cluster, "wfh", "early")
    _deleted_at_once(cluster, "wfs", "every")


async def test_a_hook_and_a_schedule_deleted_while_the_operator_was_down_do_nothing_after(
    cluster: Cluster,
) -> None:
    """Once the operator is back, the deleted schedule starts no run, and the deleted hook
    delivers nothing to the run that then reaches its token."""
    assert cluster.apply("gone", _schedule(), "WorkflowSchedule").returncode == 0
    assert cluster.apply("late", _hook("tok-late"), "WorkflowHook").returncode == 0
    uid = _meta(cluster, "wfs", "gone")["uid"]
    await _ticked(cluster, uid, 1)
    await cluster.status_when("late", "waiting", kind="workflowhook")
    cluster.operator.stop(signal.SIGKILL)  # no cleanup of any kind
    _deleted_at_once(cluster, "wfs", "gone")
    _deleted_at_once(cluster, "wfh", "late")
    before = _runs_of(cluster, uid)
    cluster.operator.start()
    async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
        holds = {"workflow": "kid_waits", "input": "tok-late"}  # waits on the hook's token
        assert cluster.apply("holder", holds).returncode == 0
        holder = await cluster.status_when("holder", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-late"))
        # a schedule that still ticks starts a run every 2 s (the clock runs 30 times fast),
        # and a waiting hook is tried every 0.5 s: a second schedule made after the restart
        # has ticked twice, so the deleted ones would have acted by then
        assert cluster.apply("probe", _schedule(), "WorkflowSchedule").returncode == 0
        await _ticked(cluster, _meta(cluster, "wfs", "probe")["uid"], 2)
        info = await cluster.world.get_run(holder["runId"])
        assert info is not None and info.status is RunStatus.RUNNING
    assert _runs_of(cluster, uid) == before


async def test_the_finalizers_an_earlier_version_put_on_hooks_and_schedules_are_removed(
    cluster: Cluster,
) -> None:
    _create(cluster, "WorkflowHook", "old-hook", _hook("tok-old"), finalizers=EARLIER)
    _create(cluster, "WorkflowSchedule", "old-schedule", _schedule(), finalizers=EARLIER)
    # one deleted while no operator ran, its deletion held by the finalizers it carries
    cluster.operator.stop()
    _create(cluster, "WorkflowSchedule", "held", _schedule(), finalizers=EARLIER)
    cluster.kubectl("delete", "wfs", "held", "--wait=false")
    cluster.operator.start()

    async def released(kind: str, name: str) -> bool:
        found = await asyncio.to_thread(
            cluster.kubectl, "get", kind, name, "-o", "json", check=False
        )
        if found.returncode != 0:
            return "NotFound" in found.stderr
        return not json.loads(found.stdout)["metadata"].get("finalizers")

    for kind, name in (("wfh", "old-hook"), ("wfs", "old-schedule"), ("wfs", "held")):
        await wait_for(functools.partial(released, kind, name), timeout=30, interval=0.3)
    gone = cluster.kubectl("get", "wfs", "held", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
    _deleted_at_once(cluster, "wfh", "old-hook")
    _deleted_at_once(cluster, "wfs", "old-schedule")


def _refused(cluster: Cluster) -> int:
    """PATCHes of WorkflowHooks and WorkflowSchedules the API server refused with HTTP 422."""
    counts = requests(cluster, code="422")
    return sum(counts[("PATCH", kind)] for kind in ("workflowhooks", "workflowschedules"))


async def test_deleting_a_hook_and_a_schedule_with_the_operator_running_is_refused_nothing(
    cluster: Cluster,
) -> None:
    before = _refused(cluster)
    for i in range(5):
        assert cluster.apply(f"wait-{i}", _hook(f"tok-{i}"), "WorkflowHook").returncode == 0
        assert cluster.apply(f"tick-{i}", _schedule(), "WorkflowSchedule").returncode == 0
    for i in range(5):
        await cluster.status_when(f"wait-{i}", "waiting", kind="workflowhook")
        await _ticked(cluster, _meta(cluster, "wfs", f"tick-{i}")["uid"], 1)
    deleted = cluster.kubectl("delete", "wfh,wfs", "--all", "--timeout=30s", check=False)
    assert deleted.returncode == 0, deleted.stderr
    left = cluster.kubectl("get", "wfh,wfs", "-o", "json")
    assert json.loads(left.stdout)["items"] == []
    await asyncio.sleep(1.0)  # a write the operator had under way lands, or is refused
    assert _refused(cluster) - before == 0
