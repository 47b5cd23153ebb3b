"""Before the operator scales a WorkflowWorker version down, each of its pods gets the
deliveries its workers hold as ``controller.kubernetes.io/pod-deletion-cost``, so the
ReplicaSet removes idle pods first (docs/operator.md, "Which pods a scale-down removes").
There is no kubelet or ReplicaSet controller here: the version's pods are Pod objects made by
hand with its labels and their workers' heartbeats are written into the world's registry as a
worker on each pod writes them (its id starts with the pod's name, its hostname)."""

from __future__ import annotations

import json
from typing import Any

import wayline
from tests.operator.test_workflowrun import Cluster
from tests.operator.test_workflowworker import (  # noqa: F401 - fixtures
    _deployments,
    _spec,
    _until,
    _version_of,
    cluster,
    worker_crds,
)
from wayline.world.registry import served_entries
from wayline_operator.deployments import OWNER_LABEL, VERSION_LABEL
from wayline_operator.pod_costs import DELETION_COST, UNKNOWN_COST


@wayline.workflow(name="pod-cost-flow")
async def pod_cost_flow(n: int) -> int:
    return n


def _make_pods(made: Cluster, deployment: dict[str, Any], names: list[str]) -> None:
    labels = deployment["spec"]["selector"]["matchLabels"]
    assert set(labels) == {OWNER_LABEL, VERSION_LABEL}
    for name in names:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "worker", "image": "shop:1"}]},
        }
        done = made.plane.kubectl("-n", made.namespace, "create", "-f", "-", input=json.dumps(pod))
        assert done.returncode == 0, done.stderr


def _costs(made: Cluster, names: list[str]) -> dict[str, str | None]:
    found = json.loads(made.kubectl("get", "pods", "-o", "json").stdout)["items"]
    return {
        p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(DELETION_COST)
        for p in found
        if p["metadata"]["name"] in names
    }


async def _beat(made: Cluster, version: str, pod: str, held: int | None) -> None:
    """A heartbeat of a worker on ``pod`` holding ``held`` deliveries (None: a worker of an
    earlier release, whose heartbeat has no count), live for the whole test."""
    world = made.world
    entries = served_entries(
        [pod_cost_flow], None, f"{pod}:1:0a0b0c0d", 300.0, world.now(), version, held=held
    )
    await world.record_served(entries)


async def _scaled_to(made: Cluster, name: str, replicas: int) -> None:
    await _until(made, lambda: _deployments(made)[name]["spec"]["replicas"] == replicas)


async def test_a_scale_down_costs_each_pod_its_held_deliveries_first(
    cluster: Cluster,  # noqa: F811
) -> None:
    spec = _spec("shop:1", minReplicas=3, maxReplicas=3)
    assert cluster.apply("costs", spec, kind="WorkflowWorker").returncode == 0
    [first] = await _until(cluster, lambda: list(_deployments(cluster).values()) or None)
    v1, name = _version_of(first), first["metadata"]["name"]
    assert first["spec"]["replicas"] == 3
    pods = [f"{name}-busy", f"{name}-idle", f"{name}-older"]
    _make_pods(cluster, first, pods)
    await _beat(cluster, v1, pods[0], 4)
    await _beat(cluster, v1, pods[1], 0)
    await _beat(cluster, v1, pods[2], None)
    # Nothing scales down yet: no pod is given a cost.
    assert _costs(cluster, pods) == dict.fromkeys(pods)
    narrower = _spec("shop:1", minReplicas=2, maxReplicas=2)
    assert cluster.apply("costs", narrower, kind="WorkflowWorker").returncode == 0
    await _scaled_to(cluster, name, 2)
    assert _costs(cluster, pods) == {pods[0]: "4", pods[1]: "0", pods[2]: str(UNKNOWN_COST)}
    # The held counts change before the next scale-down: the costs follow them.
    await _beat(cluster, v1, pods[0], 0)
    await _beat(cluster, v1, pods[1], 2)
    await _beat(cluster, v1, pods[2], 1)
    one = _spec("shop:1", minReplicas=1, maxReplicas=1)
    assert cluster.apply("costs", one, kind="WorkflowWorker").returncode == 0
    await _scaled_to(cluster, name, 1)
    assert _costs(cluster, pods) == {pods[0]: "0", pods[1]: "2", pods[2]: "1"}
