"""Deleting WorkflowRuns on a real kube-apiserver + etcd, on both worlds: a bulk delete with
the operator running is answered without a single rejected write (counted by the API server
itself) and cancels every run; with no operator (as after ``helm uninstall``) a delete
completes at once and leaves the run in the world as it is."""

# ruff: noqa: F811 - the fixtures imported from test_workflowrun are parameters here

from __future__ import annotations

import asyncio
import json

import wayline
from tests.operator.test_scale import apply_many, requests
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings, wait_for
from wayline._core.events import RunStatus

MANY = 200


def _rejected(cluster: Cluster) -> int:
    """PATCHes of WorkflowRuns the API server refused with HTTP 422 so far."""
    return requests(cluster, code="422")[("PATCH", "workflowruns")]


async def test_deleting_many_workflowruns_at_once_is_refused_nothing_and_cancels_each_run(
    cluster: Cluster,
) -> None:
    names = [f"bulk-{i}" for i in range(MANY)]
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        apply_many(cluster, names, "tok")

        async def all_running() -> bool:
            listed = await asyncio.to_thread(cluster.kubectl, "get", "wfr", "-o", "json")
            items = json.loads(listed.stdout)["items"]
            phases = [(i.get("status") or {}).get("phase") for i in items]
            return len(items) == MANY and all(p == "running" for p in phases)

        await wait_for(all_running, timeout=180, interval=1.0)
        run_ids = [r.run_id for r in await cluster.client.list_runs(limit=2 * MANY)]
        assert len(run_ids) == MANY
        before = _rejected(cluster)
        deleted = await asyncio.to_thread(
            cluster.kubectl, "delete", "wfr", "--all", "--timeout=120s", check=False
        )
        assert deleted.returncode == 0, deleted.stderr
        left = await asyncio.to_thread(cluster.kubectl, "get", "wfr", "-o", "json")
        assert json.loads(left.stdout)["items"] == []

        async def all_cancelled() -> bool:
            runs = await cluster.client.list_runs(limit=2 * MANY)
            return len(runs) == MANY and all(r.status is RunStatus.CANCELLED for r in runs)

        await wait_for(all_cancelled, timeout=120, interval=1.0)
    assert _rejected(cluster) - before == 0


async def test_with_no_operator_a_workflowrun_deletes_at_once_and_its_run_is_left_as_it_is(
    cluster: Cluster,
) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("left", {"workflow": "kid_waits", "input": "tok-l"}).returncode == 0
        status = await cluster.status_when("left", "running")
        cluster.operator.stop()  # as after helm uninstall
        deleted = cluster.kubectl("delete", "wfr", "left", "--timeout=15s", check=False)
        assert deleted.returncode == 0, deleted.stderr
        gone = cluster.kubectl("get", "wfr", "left", check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr
        info = await cluster.world.get_run(status["runId"])
        assert info is not None and info.status is RunStatus.RUNNING
        await cluster.client.resume_hook("tok-l", "still here")
        assert await cluster.client.handle(status["runId"]).result(timeout=20) == "still here"


async def test_the_finalizer_an_earlier_version_added_is_removed(cluster: Cluster) -> None:
    body = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": "older", "finalizers": ["wayline.dev/finalizer"]},
        "spec": {"workflow": "kid_waits", "input": "tok-o"},
    }
    done = cluster.plane.kubectl(
        "-n", cluster.namespace, "create", "-f", "-", input=json.dumps(body)
    )
    assert done.returncode == 0, done.stderr

    async def released() -> bool:
        meta = (await asyncio.to_thread(cluster.get, "older"))["metadata"]
        return not meta.get("finalizers")

    await wait_for(released, timeout=30, interval=0.3)
    deleted = cluster.kubectl("delete", "wfr", "older", "--timeout=15s", check=False)
    assert deleted.returncode == 0, deleted.stderr
