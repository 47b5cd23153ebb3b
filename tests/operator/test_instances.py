"""Two installations on one cluster never start each other's runs, on a real kube-apiserver:
a cluster-wide operator (instance ``wl``) beside one namespaced to ``prod`` (instance
``prod``), each on a world of its own (a SQLite file), as two Helm releases with their own
NATS. Each owns what ``wayline_operator.instance`` says; a run that the wrong one started is
started again by its owner, in its owner's world.

The instance reaches each operator through ``WAYLINE_OPERATOR_INSTANCE`` (not ``--instance``),
so that the same test runs against an operator that knows no instances: it then fails, as the
cluster-wide one starts the other's runs."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401
    Cluster,
    Operator,
    _kubeconfig_env,
    crd_applied,
)
from tests.runtime.harness import wait_for
from wayline.world.business_ids import generation_run_id
from wayline.worlds.local import LocalWorld
from wayline_operator.reconcile import run_id_for

RUNS = 100
LABEL = "wayline.dev/instance"
LEGACY_FINALIZER = "wayline.dev/finalizer"
"""The finalizer every operator shared before instances."""


class ClusterWideOperator(Operator):
    """``python -m wayline_operator`` watching every namespace (the chart's ``clusterWide``)."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "wayline_operator"]


def _namespace(plane: Any) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"  # never deleted: no namespace controller here
    done = plane.kubectl("create", "namespace", name)
    assert done.returncode == 0, done.stderr
    return name


def _env(plane: Any, world: str, instance: str) -> dict[str, str]:
    return {
        **_kubeconfig_env(world, plane.kubeconfig),
        "WAYLINE_OPERATOR_INSTANCE": instance,
    }


def _create_runs(plane: Any, namespace: str, labels: dict[str, str], tmp: Path) -> None:
    """``RUNS`` WorkflowRuns in one request (no worker serves ``nowhere``: each run waits,
    and its status says so at once, so the test needs no worker)."""
    items = [
        {
            "apiVersion": "wayline.dev/v1alpha1",
            "kind": "WorkflowRun",
            "metadata": {"name": f"r{i}", "namespace": namespace, "labels": labels},
            "spec": {"workflow": "nowhere", "input": i},
        }
        for i in range(RUNS)
    ]
    path = tmp / f"{namespace}-runs.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    done = plane.kubectl("create", "-f", str(path), timeout=120)
    assert done.returncode == 0, done.stderr


def _runs(plane: Any, namespace: str) -> list[dict[str, Any]]:
    done = plane.kubectl("-n", namespace, "get", "wfr", "-o", "json")
    assert done.returncode == 0, done.stderr
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    return items


async def _all_mirrored(plane: Any, namespace: str, timeout: float) -> list[dict[str, Any]]:
    async def mirrored() -> list[dict[str, Any]] | None:
        items = await asyncio.to_thread(_runs, plane, namespace)
        done = [r for r in items if (r.get("status") or {}).get("runId")]
        return items if len(done) == RUNS else None

    found: list[dict[str, Any]] = await wait_for(mirrored, timeout=timeout, interval=1.0)
    return found


async def _run_ids(url: str) -> set[str]:
    world = wayline.open_world(url)
    await world.start()
    try:
        return {r.run_id for r in await world.list_runs(limit=10 * RUNS)}
    finally:
        await world.close()


async def test_two_releases_each_start_only_their_own_runs(
    control_plane: Any,
    crd_applied: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    wl_ns, prod_ns = _namespace(control_plane), _namespace(control_plane)
    wl_url, prod_url = f"sqlite:///{tmp_path / 'wl.db'}", f"sqlite:///{tmp_path / 'prod.db'}"
    wl = ClusterWideOperator("", _env(control_plane, wl_url, "wl"), tmp_path / "wl.log")
    prod = Operator(prod_ns, _env(control_plane, prod_url, "prod"), tmp_path / "prod.log")
    wl.start()
    prod.start()
    try:
        _create_runs(control_plane, wl_ns, {LABEL: "wl"}, tmp_path)
        _create_runs(control_plane, prod_ns, {}, tmp_path)  # unlabelled: its namespace's
        wl_runs = await _all_mirrored(control_plane, wl_ns, timeout=180)
        prod_runs = await _all_mirrored(control_plane, prod_ns, timeout=180)
        wl_ids = {_named(r) for r in wl_runs}
        prod_ids = {_named(r) for r in prod_runs}
        in_wl, in_prod = await _run_ids(wl_url), await _run_ids(prod_url)
        stolen = len(in_wl & prod_ids), len(in_prod & wl_ids)
        assert stolen == (0, 0), f"runs started by the other release (wl, prod): {stolen}"
        assert (in_wl, in_prod) == (wl_ids, prod_ids)
        for instance, items in (("wl", wl_runs), ("prod", prod_runs)):
            for item in items:
                status = item["status"]
                assert status["runId"] == _named(item)
                assert status.get("instance") == instance, (item["metadata"]["name"], status)
                # a WorkflowRun carries no finalizer, and the other operator wrote none either
                assert not item["metadata"].get("finalizers"), item
    finally:
        prod.stop()
        wl.stop()
    for log in (wl.log, prod.log):
        assert "Traceback" not in log.read_text()


def _named(resource: dict[str, Any]) -> str:
    """The run id of a resource's run: its name's first, in its namespace."""
    meta = resource["metadata"]
    return generation_run_id(meta["name"], meta["namespace"], 0)


@pytest.mark.parametrize("own_world", ["local", "nats"])
async def test_a_run_started_by_the_wrong_release_is_started_again_by_its_own(
    request: pytest.FixtureRequest,
    control_plane: Any,
    crd_applied: None,  # noqa: F811
    tmp_path: Path,
    own_world: str,
) -> None:
    """The wrong start as an operator that knew no instances made it: the run is in the other
    world, and the resource's status names it, with no worker there. Its owner starts it in
    its own world (SQLite, or a prefix on a real nats-server) under the same id, says so, and
    writes the status afresh."""
    namespace = _namespace(control_plane)
    wrong_db = tmp_path / "wl.db"
    own_url = f"sqlite:///{tmp_path / 'prod.db'}"
    if own_world == "nats":
        server = request.getfixturevalue("nats_server")
        own_url = f"{server.url}?prefix={namespace.replace('-', '')}"
    plane = Cluster(control_plane, namespace, None, None, None)  # type: ignore[arg-type]
    resource = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        # the finalizer every operator shared before instances, as an earlier version left it
        "metadata": {"name": "stolen", "finalizers": [LEGACY_FINALIZER]},
        "spec": {"workflow": "nowhere", "input": 7},
    }
    made = control_plane.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(resource))
    assert made.returncode == 0, made.stderr
    uid = plane.get("stolen")["metadata"]["uid"]
    run_id = run_id_for(uid)
    wrong = LocalWorld(wrong_db)
    await wrong.start()
    try:
        await wayline.Client(wrong, namespace=namespace).start_with(
            wayline.StartOptions(run_id=run_id), "nowhere", 7
        )
    finally:
        await wrong.close()
    stale = {"runId": run_id, "phase": "pending", "workflow": "nowhere", "lastSeq": 1}
    patched = plane.kubectl(
        *("patch", "wfr", "stolen", "--subresource=status", "--type=merge"),
        *("-p", json.dumps({"status": stale})),
        check=False,
    )
    assert patched.returncode == 0, patched.stderr

    own = Operator(namespace, _env(control_plane, own_url, "prod"), tmp_path / "prod.log")
    own.start()
    try:
        assert await wait_for(lambda: _has(own_url, run_id), timeout=60, interval=0.5)
        event = await plane.event_when("stolen", "WrongInstance", timeout=60)
        assert event["type"] == "Warning" and run_id in event["message"]

        async def rewritten() -> dict[str, Any] | None:
            status = (await asyncio.to_thread(plane.get, "stolen")).get("status") or {}
            return status if status.get("instance") == "prod" else None

        status = await wait_for(rewritten, timeout=60, interval=0.5)
        assert status["runId"] == run_id and status["world"] == own_url
        assert await _has(f"sqlite:///{wrong_db}", run_id)  # the other world's run stays
        # its owner takes off the old shared finalizer: the delete completes
        gone = plane.kubectl("delete", "wfr", "stolen", "--timeout=60s", check=False)
        assert gone.returncode == 0, gone.stderr
    finally:
        own.stop()
    assert "Traceback" not in own.log.read_text()


async def _has(db: str, run_id: str) -> bool:
    return run_id in await _run_ids(db)
