"""WorkflowWorker on a real kube-apiserver + etcd, on either world. There is no kubelet here,
so a version's "pods" are workers in this process started with the version the operator put in
the Deployment (``WAYLINE_WORKER_VERSION``), as a pod of it would be: what the operator sees of
them is what real pods write, their registry entries. A rollout keeps the old version's
Deployment while a run pinned to it lives and deletes it after the run ends; a retired
version's run is shown as blocked; a backlog scales the current version up and, drained, down."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.operator.operated import operated
from tests.operator.test_workflowrun import Cluster
from tests.runtime.harness import settings, wait_for
from tests.servers import free_port
from wayline_operator.deployments import DRAINING_ENV, VERSION_ENV


@wayline.step(name="wfw-op-step")
async def wfw_op_step(n: int) -> int:
    return n + 1


@wayline.workflow(name="wfw-op-held")
async def wfw_op_held(token: str) -> object:
    """A run pinned to version 1's definition that lives until its hook is resumed."""
    await wfw_op_step(1)
    return await wayline.create_hook(token)


@wayline.workflow(name="wfw-op-new")
async def wfw_op_new(n: int) -> int:
    """What version 2 serves: another definition, so a run of version 1 is pinned to it."""
    return await wfw_op_step(n)


@wayline.step(name="wfw-op-long-step")
async def wfw_op_long_step(marker: str) -> str:
    """A step longer than the version's cooldown: it ends once ``marker`` exists."""
    while not os.path.exists(marker):  # noqa: ASYNC110, ASYNC240 - a tiny local marker file
        await asyncio.sleep(0.05)
    return marker


@wayline.workflow(name="wfw-op-long")
async def wfw_op_long(marker: str) -> str:
    return await wfw_op_long_step(marker)


@wayline.workflow(name="wfw-op-sleepy")
async def wfw_op_sleepy(n: int) -> int:
    """A run that sleeps long after its first step: its wake is a delayed message."""
    n = await wfw_op_step(n)
    await wayline.sleep("20m")
    return await wfw_op_step(n)


@pytest.fixture(scope="module")
def worker_crds(crds_established: None) -> None:
    """The CRDs, applied once a session (tests/operator/conftest.py)."""


@pytest.fixture(params=["local", "nats"])
async def cluster(
    request: pytest.FixtureRequest,
    control_plane: Any,
    worker_crds: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Cluster]:
    env = {"WAYLINE_OPERATOR_WORKER_SECONDS": "0.3"}
    async with operated(request, control_plane, tmp_path, monkeypatch, "w", env) as made:
        yield made


def _spec(image: str, **more: Any) -> dict[str, Any]:
    return {"image": image, "apps": ["shop.flows"], "cooldownSeconds": 0, **more}


def _deployments(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """The namespace's Deployments by name, as ``kubectl get deployments -o json`` lists them,
    read in this process: the tests poll them a few times a second, and a kubectl process
    each time cost a core's share on a loaded machine (so do ``_worker`` and ``_events``)."""
    path = f"/apis/apps/v1/namespaces/{cluster.namespace}/deployments"
    code, body = cluster.plane.read(path)
    assert code == 200, f"GET {path}: HTTP {code}: {body.get('message')}"
    return {d["metadata"]["name"]: d for d in body["items"]}


def _worker(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.get(name, "wfw")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    return text


def _events(cluster: Cluster, name: str) -> list[str]:
    return [e["reason"] for e in cluster.events(name)]


async def _until(cluster: Cluster, check: Any, timeout: float = 30) -> Any:
    """``check``'s first truthy result, read again every 0.3 s; a status or a list not written
    yet (``KeyError``, ``IndexError`` from a WorkflowWorker the operator has not got to) is
    read again too, as a falsy result is: under load the first read came before the first
    status write and failed the test with ``KeyError: 'status'``."""

    async def once() -> Any:
        try:
            return await asyncio.to_thread(check)
        except (KeyError, IndexError):
            return None

    return await wait_for(once, timeout=timeout, interval=0.3)


def _version_of(deployment: dict[str, Any]) -> str:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return next(e["value"] for e in container["env"] if e["name"] == VERSION_ENV)


def _pod(cluster: Cluster, version: str, flows: list[Any]) -> wayline.Worker:
    """A worker as a pod of ``version`` runs it."""
    return wayline.Worker(
        cluster.world, flows, settings=settings(worker_version=version), heartbeat_seconds=0.2
    )


async def _rolled_out(cluster: Cluster, name: str) -> tuple[str, str]:
    """Version 1 deployed and serving a live pinned run, then the image changed: (v1, v2)."""
    assert cluster.apply(name, _spec("shop:1"), kind="WorkflowWorker").returncode == 0
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    return _version_of(first), first["metadata"]["name"]


async def test_a_rollout_keeps_the_old_version_until_its_pinned_run_ends(cluster: Cluster) -> None:
    v1, first = await _rolled_out(cluster, "shop")
    assert first == f"shop-{v1}"
    async with _pod(cluster, v1, [wfw_op_held]):
        run = await cluster.client.start(wfw_op_held, "wfw-op-rollout")
        await wait_for(lambda: _status_is(cluster, run.run_id, wayline.RunStatus.RUNNING))
        assert cluster.apply("shop", _spec("shop:2"), kind="WorkflowWorker").returncode == 0

        def both() -> dict[str, dict[str, Any]] | None:
            found = _deployments(cluster)
            return found if len(found) == 2 else None

        deployed = await _until(cluster, both)
        [second] = [d for d in deployed.values() if d["metadata"]["name"] != first]
        v2 = _version_of(second)
        async with _pod(cluster, v2, [wfw_op_new]):

            def draining() -> dict[str, Any] | None:
                rows = {
                    r["name"]: r for r in _worker(cluster, "shop")["status"].get("versions") or []
                }
                old = rows.get(v1)
                return (
                    rows if old and old["state"] == "Draining" and old["pinnedRuns"] == 1 else None
                )

            rows = await _until(cluster, draining)
            assert rows[v2]["state"] == "Current"
            await asyncio.sleep(1.0)  # several looks: v1 stays while its run lives
            assert set(_deployments(cluster)) == {first, f"shop-{v2}"}
            await cluster.client.resume_hook("wfw-op-rollout", "done")
            assert await run.result(timeout=30) == "done"
            # the run ended on version 1's worker; then version 1's Deployment goes
            await _until(cluster, lambda: set(_deployments(cluster)) == {f"shop-{v2}"} or None)

    def deleted() -> list[str] | None:
        reasons = _events(cluster, "shop")
        return reasons if "VersionDeleted" in reasons else None

    reasons = await _until(cluster, deleted)
    assert {"VersionCreated", "VersionDraining", "VersionDeleted"} <= set(reasons)
    status = _worker(cluster, "shop")["status"]
    assert (status["current"], status["versionCount"]) == (v2, 1)


def _drains(cluster: Cluster, name: str) -> dict[str, bool]:
    """Whether each version's Deployment tells its pods to drain, by version."""
    out: dict[str, bool] = {}
    for found in _deployments(cluster).values():
        if found["metadata"]["name"].startswith(f"{name}-"):
            [container] = found["spec"]["template"]["spec"]["containers"]
            drains = {"name": DRAINING_ENV, "value": "1"} in container.get("env", [])
            out[_version_of(found)] = drains
    return out


async def test_an_old_version_drains_and_a_rollback_takes_the_drain_off(cluster: Cluster) -> None:
    """New runs go to the current version only: the operator tells every other version's pods
    to drain (they take no new run), and a rollback makes the old version current again."""
    v1, _ = await _rolled_out(cluster, "flip")
    assert _drains(cluster, "flip") == {v1: False}
    assert cluster.apply("flip", _spec("shop:2"), kind="WorkflowWorker").returncode == 0

    def two(want_v1: bool) -> dict[str, bool] | None:
        found = _drains(cluster, "flip")
        return found if len(found) == 2 and found[v1] is want_v1 else None

    drains = await _until(cluster, lambda: two(True))
    [v2] = set(drains) - {v1}
    assert drains[v2] is False
    # version 2's pods never said what they serve, so it is kept (and drains) after the rollback
    assert cluster.apply("flip", _spec("shop:1"), kind="WorkflowWorker").returncode == 0
    assert await _until(cluster, lambda: two(False)) == {v1: False, v2: True}
    assert _worker(cluster, "flip")["status"]["current"] == v1


async def _status_is(cluster: Cluster, run_id: str, status: wayline.RunStatus) -> bool:
    info = await cluster.world.get_run(run_id)
    return info is not None and info.status is status


async def test_a_retired_version_is_deleted_and_its_run_shown_blocked(cluster: Cluster) -> None:
    v1, first = await _rolled_out(cluster, "till")
    async with _pod(cluster, v1, [wfw_op_held]):
        run = await cluster.client.start(wfw_op_held, "wfw-op-retired")
        await wait_for(lambda: _status_is(cluster, run.run_id, wayline.RunStatus.RUNNING))
        assert cluster.apply("till", _spec("shop:2"), kind="WorkflowWorker").returncode == 0
        await _until(cluster, lambda: len(_deployments(cluster)) == 2 or None)
        retired = _spec("shop:2", retire=[v1])
        assert cluster.apply("till", retired, kind="WorkflowWorker").returncode == 0

        def blocked() -> dict[str, Any] | None:
            rows = {r["name"]: r for r in _worker(cluster, "till")["status"].get("versions") or []}
            return rows.get(v1) if (rows.get(v1) or {}).get("state") == "Retired" else None

        row = await _until(cluster, blocked)
        assert row["blockedRuns"] == [run.run_id] and row["pinnedRuns"] == 1
        assert first not in _deployments(cluster)
        assert "VersionRetired" in _events(cluster, "till")
        await cluster.client.resume_hook("wfw-op-retired", "late")  # its pod still runs here
        await run.result(timeout=30)
    # the run ended: the retired version's row goes
    await _until(cluster, lambda: _worker(cluster, "till")["status"]["versionCount"] == 1 or None)


async def test_a_backlog_scales_the_current_version_up_and_drained_down(cluster: Cluster) -> None:
    spec = _spec("shop:1", minReplicas=0, maxReplicas=3, scaleToZero=True, backlogPerReplica=2)
    assert cluster.apply("bulk", spec, kind="WorkflowWorker").returncode == 0
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    v1 = _version_of(first)
    async with _pod(cluster, v1, [wfw_op_new]):  # its topics are learnt, then it stops
        await _until(
            cluster, lambda: _worker(cluster, "bulk")["status"]["versions"][0]["topics"] or None
        )
    runs = [await cluster.client.start(wfw_op_new, n) for n in range(6)]
    scaled = await _until(
        cluster,
        lambda: _deployments(cluster)[first["metadata"]["name"]]["spec"]["replicas"] == 3 or None,
    )
    assert scaled and _worker(cluster, "bulk")["status"]["backlog"] >= 5
    async with _pod(cluster, v1, [wfw_op_new]):
        for run in runs:
            await run.result(timeout=30)
        await _until(
            cluster,
            lambda: (
                _deployments(cluster)[first["metadata"]["name"]]["spec"]["replicas"] == 0 or None
            ),
        )
    assert "Scaled" in _events(cluster, "bulk")
    printed = cluster.kubectl("get", "wfw", "bulk").stdout
    assert printed.split("\n")[0].split() == [
        "NAME",
        "CURRENT",
        "VERSIONS",
        "READY",
        "PINNED",
        "AGE",
    ]


async def test_a_step_under_way_keeps_its_version_from_scaling_to_zero(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = _spec("shop:1", minReplicas=0, maxReplicas=2, scaleToZero=True, backlogPerReplica=2)
    assert cluster.apply("long", spec, kind="WorkflowWorker").returncode == 0
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    v1, name = _version_of(first), first["metadata"]["name"]
    async with _pod(cluster, v1, [wfw_op_long]):  # its topics are learnt, then it stops
        await _until(
            cluster, lambda: _worker(cluster, "long")["status"]["versions"][0]["topics"] or None
        )
    await _until(cluster, lambda: _deployments(cluster)[name]["spec"]["replicas"] == 0 or None)
    marker = str(tmp_path / "long-step-done")
    run = await cluster.client.start(wfw_op_long, marker)
    await _until(cluster, lambda: _deployments(cluster)[name]["spec"]["replicas"] == 1 or None)
    async with _pod(cluster, v1, [wfw_op_long]):
        # The step is under way: the ready backlog is empty and only a held message is left.
        await _until(
            cluster,
            lambda: _worker(cluster, "long")["status"].get("backlog") == 0 or None,
        )
        looked = _worker(cluster, "long")["status"]["lastScaleTime"]
        # Several looks (one every 0.3 s) with a cooldown of 0 see the step still under way.
        await asyncio.sleep(2)
        assert _deployments(cluster)[name]["spec"]["replicas"] == 1
        assert _worker(cluster, "long")["status"]["lastScaleTime"] == looked
        assert _worker(cluster, "long")["status"]["inFlight"] >= 1
        Path(marker).touch()  # noqa: ASYNC240 - a tiny local marker file
        assert await run.result(timeout=30) == marker
        await _until(cluster, lambda: _deployments(cluster)[name]["spec"]["replicas"] == 0 or None)


async def test_sleeping_runs_due_within_the_lead_time_bring_their_version_up(
    cluster: Cluster,
) -> None:
    # Four runs asleep for 20 minutes: no ready message, none held. With a lead time of 0 their
    # version goes to zero; with a lead time longer than their sleep, their wakes count as load
    # and the version is brought up (ceil(4 / 2) replicas) while every wake is still ahead.
    # The count is in the status, in `kubectl get -o wide` and in the operator's metrics.
    port = free_port()
    served = [
        *cluster.operator.command(),
        "--metrics-port",
        str(port),
        "--metrics-host",
        "127.0.0.1",
    ]
    cluster.operator.stop()
    cluster.operator.command = lambda: served  # type: ignore[method-assign]
    cluster.operator.start()
    spec = _spec("shop:1", minReplicas=0, maxReplicas=3, scaleToZero=True, backlogPerReplica=2)
    made = cluster.apply("sleepy", {**spec, "scaleUpLeadSeconds": 0}, kind="WorkflowWorker")
    assert made.returncode == 0, made.stderr
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    v1, name = _version_of(first), first["metadata"]["name"]
    async with _pod(cluster, v1, [wfw_op_sleepy]):
        runs = [await cluster.client.start(wfw_op_sleepy, n) for n in range(4)]

        async def asleep() -> bool:
            # the topics the version's row names, read afresh: a run's route is learnt late
            status = await asyncio.to_thread(_worker, cluster, "sleepy")
            topics = [
                t for r in (status.get("status") or {}).get("versions") or [] for t in r["topics"]
            ]
            ahead = await cluster.world.delayed_messages(topics, cluster.world.now() + 1500)
            return sum(ahead.values()) == 4

        assert await wait_for(asleep, timeout=30)
    await _until(cluster, lambda: _deployments(cluster)[name]["spec"]["replicas"] == 0 or None)
    assert _worker(cluster, "sleepy")["status"]["dueSoon"] == 0
    ahead = {**spec, "scaleUpLeadSeconds": 1500}
    assert cluster.apply("sleepy", ahead, kind="WorkflowWorker").returncode == 0
    await _until(cluster, lambda: _deployments(cluster)[name]["spec"]["replicas"] == 2 or None)
    status = _worker(cluster, "sleepy")["status"]
    assert (status["dueSoon"], status["backlog"], status["inFlight"]) == (4, 0, 0)
    header, row = cluster.kubectl("get", "wfw", "sleepy", "-o", "wide").stdout.splitlines()
    assert dict(zip(header.split(), row.split(), strict=False))["DUESOON"] == "4"
    gauge = f'wayline_operator_worker_due_soon{{namespace="{cluster.namespace}",worker="sleepy"}}'
    assert f"{gauge} 4.0" in await asyncio.to_thread(_scrape, port)
    async with _pod(cluster, v1, [wfw_op_sleepy]):  # woken now, the runs end on version 1
        for n, run in enumerate(runs):
            await run.wake()
            assert await run.result(timeout=30) == n + 2


async def test_a_change_outside_the_version_rolls_the_current_deployment(cluster: Cluster) -> None:
    """Resources are not part of a version: the same Deployment takes them (its pods roll), and
    a variable taken out of the template goes (the template is replaced, not merged)."""
    template = {"spec": {"containers": [{"name": "worker", "env": [{"name": "X", "value": "1"}]}]}}
    assert (
        cluster.apply("roll", _spec("shop:1", template=template), kind="WorkflowWorker").returncode
        == 0
    )
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    limits = {"limits": {"memory": "300Mi"}}
    changed = _spec(
        "shop:1", resources=limits, template={"spec": {"containers": [{"name": "worker"}]}}
    )
    assert cluster.apply("roll", changed, kind="WorkflowWorker").returncode == 0

    def rolled() -> dict[str, Any] | None:
        [only] = list(_deployments(cluster).values())
        [container] = only["spec"]["template"]["spec"]["containers"]
        return container if container.get("resources") == limits else None

    container = await _until(cluster, rolled)
    assert [e["name"] for e in container["env"]] == [VERSION_ENV]
    assert list(_deployments(cluster)) == [first["metadata"]["name"]]


def test_a_misspelt_field_is_refused_naming_it(control_plane: Any, worker_crds: None) -> None:
    """Pruned, ``minReplica: 3`` ran the default of one replica in silence."""
    manifest = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowWorker",
        "metadata": {"name": "typo", "namespace": "default"},
        "spec": {"image": "shop:1", "apps": ["shop.flows"], "minReplica": 3},
    }
    done = control_plane.kubectl("create", "-f", "-", input=json.dumps(manifest))
    assert done.returncode != 0
    assert "unknown field(s) in spec: minReplica" in done.stderr, done.stderr
