"""A WorkflowHook with ``spec.buffer`` on a real kube-apiserver: applied before any run waits
on its token, it stores the payload (phase waiting, reason Buffered) instead of waiting
itself, and the run the operator then starts in the namespace receives it at once, once."""

from __future__ import annotations

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings
from wayline._core.events import EventType


async def test_a_workflowhook_with_buffer_stores_its_payload_for_the_run_to_come(
    cluster: Cluster,  # noqa: F811
) -> None:
    spec = {"token": "tok-b", "payload": {"ok": 1}, "buffer": "10m"}
    made = cluster.apply("early", spec, "WorkflowHook")
    assert made.returncode == 0, made.stderr
    buffered = await cluster.status_when("early", "waiting", kind="workflowhook")
    [not_yet] = buffered["conditions"]
    assert (not_yet["status"], not_yet["reason"]) == ("False", "Buffered")
    assert "buffered for 10m" in not_yet["message"]
    await cluster.event_when("early", "Buffered")
    entry = await cluster.world.hook_buffer().get(cluster.namespace, "tok-b")
    assert (
        entry is not None
        and entry.entry_id == cluster.get("early", "workflowhook")["metadata"]["uid"]
    )
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("late", {"workflow": "kid_waits", "input": "tok-b"})
        done = await cluster.status_when("late", "completed")
        delivered = await cluster.status_when("early", "delivered", kind="workflowhook")
    assert done["output"] == {"ok": 1}
    assert delivered["runId"] == done["runId"]
    received = [
        e
        for e in await cluster.world.list_events(done["runId"])
        if e.type is EventType.HOOK_RECEIVED
    ]
    assert len(received) == 1
    bad = cluster.apply("bad", {"token": "tok-x", "buffer": "soon"}, "WorkflowHook")
    assert bad.returncode == 0, bad.stderr
    refused = await cluster.status_when("bad", "failed", kind="workflowhook")
    assert "spec.buffer" in refused["message"]
