"""A run's search attributes as labels of its WorkflowRun, on a real kube-apiserver + etcd
with the operator in its own process: ``kubectl get wfr -l attributes.wayline.dev/...``
finds the runs by them, on SQLite and on NATS."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import wayline
from tests.operator.test_workflowrun import Cluster, cluster, crd_applied  # noqa: F401
from tests.runtime.harness import settings, wait_for

PREFIX = "attributes.wayline.dev/"


@wayline.workflow
async def labelled_order(tenant: str) -> str:
    wayline.set_attributes(
        tenant=tenant,
        amount=150,
        vip=True,
        due=datetime(2026, 12, 1, tzinfo=UTC),  # ':' and '+': no label value, not mirrored
        tags=["a", "b"],  # a list: not mirrored
        note="two words",  # a space: not mirrored
    )
    return tenant


def _selected(on: Cluster, selector: str) -> set[str]:
    done = on.kubectl("get", "wfr", "-l", selector, "-o", "name")
    return {line.rsplit("/", 1)[-1] for line in done.stdout.split()}


async def test_kubectl_selects_workflowruns_by_their_attributes(
    cluster: Cluster,  # noqa: F811
) -> None:
    async with wayline.Worker(cluster.world, [labelled_order], settings=settings()):
        for name, tenant in (("acme-1", "acme"), ("globex-1", "globex")):
            spec = {"workflow": "labelled_order", "input": [tenant]}
            assert cluster.apply(name, spec).returncode == 0
        for name in ("acme-1", "globex-1"):
            await cluster.status_when(name, "completed")

    async def labelled() -> bool:
        return await asyncio.to_thread(_selected, cluster, f"{PREFIX}tenant") == {
            "acme-1",
            "globex-1",
        }

    await wait_for(labelled, timeout=20, interval=0.3)
    assert _selected(cluster, f"{PREFIX}tenant=acme") == {"acme-1"}
    assert _selected(cluster, f"{PREFIX}tenant=acme,{PREFIX}amount=150") == {"acme-1"}
    labels = cluster.get("acme-1")["metadata"]["labels"]
    ours = {k: v for k, v in labels.items() if k.startswith(PREFIX)}
    assert ours == {f"{PREFIX}tenant": "acme", f"{PREFIX}amount": "150", f"{PREFIX}vip": "true"}
