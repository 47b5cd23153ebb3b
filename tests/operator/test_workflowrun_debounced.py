"""A WorkflowRun of a debounced workflow (``wayline.Debounce``) on a real API server, on both
worlds: its key is a function of the workflow's code, which the operator does not run, so the
resource is refused as an ``InvalidSpec`` naming the reason and nothing is started (before,
the operator started a plain run by name that no debounce held back)."""

from __future__ import annotations

import contextlib

import pytest

import wayline
from tests.operator.test_workflowrun import Cluster, cluster, crd_applied  # noqa: F401
from tests.runtime.harness import settings, wait_for


@wayline.workflow(
    name="wfr-debounced.reindex",
    debounce=wayline.Debounce(key=lambda doc: doc, period="0.2s"),
)
async def wfr_debounced_reindex(doc: str) -> str:
    return f"indexed {doc}"


@pytest.mark.parametrize("worker", ["live", "scaled-to-zero"])
async def test_a_workflowrun_of_a_debounced_workflow_is_refused_naming_why(
    cluster: Cluster,  # noqa: F811
    worker: str,
) -> None:
    # A version scaled to zero has no live worker: the registry's last entry still says the
    # workflow is debounced, so the WorkflowRun is refused all the same (not started plain).
    resource = f"debounced-{worker}"
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(
            wayline.Worker(cluster.world, [wfr_debounced_reindex], settings=settings())
        )

        async def heard() -> bool:
            served = await cluster.world.list_served()
            return any(e.get("debounced") for e in served)

        assert await wait_for(heard, timeout=20)
        if worker == "scaled-to-zero":
            await stack.aclose()
        spec = {"workflow": "wfr-debounced.reindex", "input": "doc-1"}
        assert cluster.apply(resource, spec).returncode == 0
        event = await cluster.event_when(resource, "InvalidSpec", timeout=30)
    assert "is debounced" in event["message"] and event["type"] == "Warning"
    status = cluster.get(resource, "wfr")["status"]
    assert "wayline start MODULE:WORKFLOW" in status["message"]
    assert await cluster.client.list_runs(workflow="wfr-debounced.reindex") == []
