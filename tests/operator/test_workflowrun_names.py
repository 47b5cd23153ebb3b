"""A WorkflowRun's name is its run's business id, in the client namespace of its Kubernetes
namespace (docs/operator.md, "Names"): the CLI and a ``Client`` of that namespace find the run
by the resource's name; a resource recreated under a name whose run someone else still runs
waits for that run to end; a resource whose run was started under its uid's id, as before
names were ids, keeps that run. On a real kube-apiserver, with the operator in its own
process, on both worlds."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings, wait_for
from wayline._core.events import RunStatus
from wayline.cli import main
from wayline.world.business_ids import generation_run_id
from wayline_operator.reconcile import OWNER_MEMO, run_id_for


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*argv, "--world", os.environ["WAYLINE_WORLD"]])
    return code, capsys.readouterr().out


async def test_a_workflowrun_is_found_by_its_name_in_its_namespace(
    cluster: Cluster,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("order-7", {"workflow": "chain", "input": [4]}).returncode == 0
        status = await cluster.status_when("order-7", "completed")
    uid = cluster.get("order-7")["metadata"]["uid"]
    assert status["runId"] == generation_run_id("order-7", cluster.namespace, 0)
    client = wayline.Client(cluster.world, namespace=cluster.namespace)
    assert await client.resolve("order-7") == status["runId"]
    info = await client.get_run("order-7")
    assert info.business_id == "order-7" and info.attributes["memo"] == {OWNER_MEMO: uid}
    assert await client.handle("order-7").result(timeout=10) == 6
    code, out = await asyncio.to_thread(
        _cli, capsys, "runs", "show", "order-7", "--namespace", cluster.namespace, "--json"
    )
    shown = json.loads(out)
    assert code == 0 and (shown["runId"], shown["businessId"]) == (status["runId"], "order-7")
    with pytest.raises(wayline.RunNotFoundError):
        await cluster.client.resolve("order-7")  # a client of no namespace: not its run


async def test_a_workflowrun_waits_while_its_name_is_the_id_of_a_live_run(
    cluster: Cluster,  # noqa: F811
) -> None:
    """The name's live run is a client's (no worker yet, so it stays live): the resource
    starts nothing, says which run holds its name, and starts its own once that one ended."""
    client = wayline.Client(cluster.world, namespace=cluster.namespace)
    held = await client.start_with(wayline.StartOptions(id="taken"), "chain", 2)
    assert cluster.apply("taken", {"workflow": "chain", "input": [4]}).returncode == 0
    event = await cluster.event_when("taken", "IdInUse")
    assert held.run_id in event["message"] and event["type"] == "Warning"
    waiting = await cluster.status_when("taken", "pending")
    blocked = {c["type"]: c for c in waiting["conditions"]}["Blocked"]
    assert (blocked["status"], blocked["reason"]) == ("True", "IdInUse")
    assert not waiting.get("runId")
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        status = await cluster.status_when("taken", "completed", timeout=30)
    assert status["output"] == 6
    assert status["runId"] == generation_run_id("taken", cluster.namespace, 1)
    assert (await client.get_run(held.run_id)).status is RunStatus.COMPLETED
    assert await client.resolve("taken") == status["runId"]


async def test_a_recreated_workflowrun_starts_a_new_run_under_its_name(
    cluster: Cluster,  # noqa: F811
) -> None:
    """Deleted and applied again, as a kubectl user re-runs a job: the deletion cancels the
    old run, and the new resource's run is the name's next one."""
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("redo", {"workflow": "kid_waits", "input": "tok-redo"}).returncode == 0
        first = await cluster.status_when("redo", "running")
        cluster.kubectl("delete", "wfr", "redo", "--timeout=20s")
        assert cluster.apply("redo", {"workflow": "chain", "input": [3]}).returncode == 0
        second = await cluster.status_when("redo", "completed", timeout=30)
    old = await cluster.world.get_run(first["runId"])
    assert old is not None and old.status is RunStatus.CANCELLED
    assert second["runId"] != first["runId"] and second["output"] == 3
    client = wayline.Client(cluster.world, namespace=cluster.namespace)
    assert await client.resolve("redo") == second["runId"]


async def test_a_workflowrun_started_under_its_uid_keeps_its_run(
    cluster: Cluster,  # noqa: F811
) -> None:
    """Two resources whose runs an operator from before names were ids started under their
    uids' ids: one whose status names its run, one whose status that operator never wrote.
    Both keep their runs: mirrored, cancelled from the spec, and no run started by name."""
    cluster.operator.stop()
    client = wayline.Client(cluster.world, namespace=cluster.namespace)
    legacy: dict[str, str] = {}
    for name in ("old-a", "old-b"):
        spec = {"workflow": "kid_waits", "input": f"tok-{name}"}
        assert cluster.apply(name, spec).returncode == 0
        legacy[name] = run_id_for(cluster.get(name)["metadata"]["uid"])
        options = wayline.StartOptions(run_id=legacy[name])
        await client.start_with(options, "kid_waits", f"tok-{name}")
    stale = json.dumps({"status": {"runId": legacy["old-a"], "phase": "pending", "lastSeq": 1}})
    cluster.kubectl(*("patch", "wfr", "old-a", "--subresource=status", "--type=merge", "-p", stale))
    cluster.operator.start()
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        for name in ("old-a", "old-b"):
            status = await cluster.status_when(name, "running", timeout=30)
            assert status["runId"] == legacy[name]
        await wait_for(lambda: cluster.world.get_hook("tok-old-a"))
        await cluster.client.resume_hook("tok-old-a", {"ok": True})
        done = await cluster.status_when("old-a", "completed")
        cancel = json.dumps({"spec": {"cancel": True}})
        cluster.kubectl("patch", "wfr", "old-b", "--type=merge", "-p", cancel)
        cancelled = await cluster.status_when("old-b", "cancelled", timeout=30)
    assert done["output"] == {"ok": True} and cancelled["runId"] == legacy["old-b"]
    runs: list[Any] = await cluster.client.list_runs()
    assert sorted(r.run_id for r in runs) == sorted(legacy.values())
