"""The operator and hostile sizes and bytes: an oversized ``spec.input`` is refused before a
run exists (status ``invalid`` and an Event), and no user payload reaches an annotation; a
run whose log is poisoned shows ``corrupt`` and comes back after a repair."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import wayline
from tests.hostile import flows
from tests.hostile.poison import poison_log
from tests.operator.test_workflowrun import Cluster, cluster, crd_applied  # noqa: F401
from tests.runtime.harness import settings, wait_for


async def test_an_oversized_input_is_refused_and_kept_out_of_annotations(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    big = "x" * (300 * 1024)
    manifest = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": "big"},
        "spec": {"workflow": "gated", "input": ["/dev/null", big]},
    }
    path = tmp_path / "big.json"
    path.write_text(json.dumps(manifest))
    # `create`, not `apply`: kubectl's own last-applied annotation would carry the input
    done = cluster.kubectl("create", "-f", str(path), check=False)
    assert done.returncode == 0, done.stderr
    status = await cluster.status_when("big", "invalid")
    assert "over the limit of 262144 bytes" in status["conditions"][0]["message"]
    assert await cluster.client.list_runs() == []
    resource = cluster.get("big")
    annotations = json.dumps(resource["metadata"].get("annotations") or {})
    assert big[:1000] not in annotations

    async def event_posted() -> bool:
        found = await asyncio.to_thread(cluster.kubectl, "get", "events", "-o", "json")
        return "over the limit" in found.stdout

    await wait_for(event_posted, timeout=20, interval=0.3)


async def test_a_poisoned_run_shows_corrupt_until_repaired(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "count")
    async with wayline.Worker(cluster.world, [flows.gated], settings=settings()):
        assert cluster.apply("p", {"workflow": "gated", "input": [path, "op-tok"]}).returncode == 0
        running = await cluster.status_when("p", "running")
        await wait_for(lambda: cluster.world.get_hook("op-tok"))
        seq = await poison_log(cluster.world, running["runId"], b"\xff garbage")
        status = await cluster.status_when("p", "corrupt")
        assert "CORRUPT" in status["message"] or str(seq) in status["message"]
        await cluster.client.repair_run(running["runId"], seq)
        await cluster.status_when("p", "running")
        await cluster.client.resume_hook("op-tok", "ok")
        done = await cluster.status_when("p", "completed")
    assert done["output"] == "ok"


async def test_a_workflowhook_for_a_run_that_ended_fails_with_a_reason(
    cluster: Cluster,  # noqa: F811
) -> None:
    from tests.operator.test_workflowrun import APPS

    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("gone", {"workflow": "kid_waits", "input": "tok-end"}).returncode == 0
        await cluster.status_when("gone", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-end"))
        done = cluster.apply("gone", {"workflow": "kid_waits", "input": "tok-end", "cancel": True})
        assert done.returncode == 0, done.stderr
        await cluster.status_when("gone", "cancelled")
        made = cluster.apply("late", {"token": "tok-end", "payload": 1}, "WorkflowHook")
        assert made.returncode == 0, made.stderr
        hook = await cluster.status_when("late", "failed", kind="workflowhook")
    assert hook["message"]
    assert "Traceback" not in cluster.operator.log.read_text()


async def test_a_runs_input_cannot_change(cluster: Cluster) -> None:  # noqa: F811
    """The run keeps the input it started with: the API server refuses an edited, added or
    removed ``spec.input`` (the admission policy applied with the CRDs), and takes the same
    input again and edits of the other fields."""
    made = cluster.apply("in", {"workflow": "kid_waits", "input": "tok-in", "cancel": True})
    assert made.returncode == 0, made.stderr
    for spec in (
        {"workflow": "kid_waits", "input": "tok-other", "cancel": True},
        {"workflow": "kid_waits", "input": ["tok-in"], "cancel": True},
        {"workflow": "kid_waits", "cancel": True},
    ):
        changed = cluster.apply("in", spec)
        assert changed.returncode != 0 and "input cannot change" in changed.stderr, spec
    same = cluster.apply("in", {"workflow": "kid_waits", "input": "tok-in", "cancel": True})
    assert same.returncode == 0, same.stderr
    bare = cluster.apply("bare", {"workflow": "kid_waits", "cancel": True})
    assert bare.returncode == 0, bare.stderr
    added = cluster.apply("bare", {"workflow": "kid_waits", "input": "x", "cancel": True})
    assert added.returncode != 0 and "input cannot change" in added.stderr
    nested = {"workflow": "kid_waits", "input": {"order": [1, 2.5, None, {"k": "v"}]}}
    assert cluster.apply("deep", nested).returncode == 0
    edited = {"workflow": "kid_waits", "input": {"order": [1, 2.5, None, {"k": "w"}]}}
    refused = cluster.apply("deep", edited)
    assert refused.returncode != 0 and "input cannot change" in refused.stderr
    cancelled = cluster.apply("deep", nested | {"cancel": True})
    assert cancelled.returncode == 0, cancelled.stderr
    assert cluster.get("deep")["spec"]["input"] == nested["input"]
