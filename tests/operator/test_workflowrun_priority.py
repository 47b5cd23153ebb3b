"""A WorkflowRun's ``spec.priority`` and ``spec.fairnessKey`` start its run with that priority
and fairness key (docs/operator.md), its status shows them, and the API server refuses a
priority out of bounds before anything starts. On a real kube-apiserver, with the operator in
its own process, on both worlds."""

from __future__ import annotations

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings
from wayline._core.ordering import Ordering


async def test_a_workflowruns_priority_and_fairness_key_start_its_run(
    cluster: Cluster,  # noqa: F811
) -> None:
    spec = {"workflow": "chain", "input": [3], "priority": 2, "fairnessKey": "acme"}
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("urgent-7", spec).returncode == 0
        status = await cluster.status_when("urgent-7", "completed", timeout=60)
    assert (status["priority"], status["fairnessKey"]) == (2, "acme")
    info = await cluster.client.get_run(status["runId"])
    assert info.ordering == Ordering(priority=2, fairness_key="acme")


async def test_a_workflowrun_without_them_shows_the_default_priority(
    cluster: Cluster,  # noqa: F811
) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("plain-7", {"workflow": "chain", "input": [3]}).returncode == 0
        status = await cluster.status_when("plain-7", "completed", timeout=60)
    assert status["priority"] == 5 and status.get("fairnessKey") is None


async def test_a_priority_out_of_bounds_is_refused_by_the_api_server(
    cluster: Cluster,  # noqa: F811
) -> None:
    done = cluster.apply("too-low", {"workflow": "chain", "input": [3], "priority": 10})
    assert done.returncode != 0
    assert "spec.priority" in done.stderr and "9" in done.stderr
