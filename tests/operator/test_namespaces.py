"""A namespace's WorkflowHooks answer only that namespace's runs, on a real kube-apiserver:
two namespaced operators share one world (hook tokens are the world's), and a WorkflowHook in
the other namespace is refused, delivers nothing and leaves the hook open for its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401
    APPS,
    Cluster,
    Operator,
    cluster,
    crd_applied,
)
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.events import EventType


async def test_a_workflowhook_of_another_namespace_is_refused_and_the_run_waits(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    other = f"t-{uuid.uuid4().hex[:10]}"
    done = cluster.plane.kubectl("create", "namespace", other)
    assert done.returncode == 0, done.stderr
    theirs = Cluster(cluster.plane, other, cluster.world, cluster.client, cluster.operator)
    operator = Operator(other, cluster.operator.env, tmp_path / "other-operator.log")
    operator.start()
    try:
        async with wayline.Worker(cluster.world, [*APPS, flows.parent_waits], settings=settings()):
            cluster.apply("order", {"workflow": "kid_waits", "input": "tok-ns"})
            cluster.apply("parent", {"workflow": "parent_waits", "input": "tok-kid"})
            run = await cluster.status_when("order", "running")
            hook = await wait_for(lambda: cluster.world.get_hook("tok-ns"))
            kid = await wait_for(lambda: cluster.world.get_hook("tok-kid"))
            parent = await cluster.status_when("parent", "running")
            assert kid.run_id != parent["runId"]  # the hook is the child's

            for name, token in (("intruder", "tok-ns"), ("kid-intruder", "tok-kid")):
                made = theirs.apply(name, {"token": token, "payload": "from-b"}, "WorkflowHook")
                assert made.returncode == 0, made.stderr
                refused = await theirs.status_when(name, "failed", kind="workflowhook")
                [never] = refused["conditions"]
                assert (never["type"], never["status"], never["reason"]) == (
                    "Delivered",
                    "False",
                    "WrongNamespace",
                )
                assert other in refused["message"] and token in refused["message"]
                said = refused["message"] + never["message"]
                assert cluster.namespace not in said and hook.run_id not in said
                assert kid.run_id not in said and "runId" not in refused
                event = await theirs.event_when(name, "WrongNamespace")
                assert event["type"] == "Warning"

            for run_id in (run["runId"], kid.run_id):  # nothing delivered, both still wait
                events = await cluster.world.list_events(run_id)
                assert not [e for e in events if e.type is EventType.HOOK_RECEIVED]
            assert cluster.get("order")["status"]["phase"] == "running"
            assert cluster.get("parent")["status"]["phase"] == "running"
            for token in ("tok-ns", "tok-kid"):
                still = await cluster.world.get_hook(token)
                assert still is not None and still.active

            for name, token in (("approve", "tok-ns"), ("approve-kid", "tok-kid")):
                made = cluster.apply(name, {"token": token, "payload": "from-a"}, "WorkflowHook")
                assert made.returncode == 0, made.stderr
                await cluster.status_when(name, "delivered", kind="workflowhook")
            assert (await cluster.status_when("order", "completed"))["output"] == "from-a"
            assert (await cluster.status_when("parent", "completed"))["output"] == "from-a"
        # refused for good: no retry, no traceback, and never delivered after all
        assert theirs.get("intruder", "wfh")["status"]["phase"] == "failed"
        log = operator.log.read_text()
        assert "Traceback" not in log and "failed temporarily" not in log
    finally:
        operator.stop()
