"""The operator attacked as a Kubernetes user (or an acceptance suite) would: resources nested
as deep as the API server takes, specs edited after the start, statuses tampered with."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import wayline
from tests.operator.test_workflowrun import APPS, Cluster, cluster, crd_applied  # noqa: F401
from tests.runtime.harness import settings, wait_for

DEPTH = 9000
"""Below the API server's own limit (10,000 levels), far above Python's json (1,000)."""


def _create_raw(on: Cluster, path: Path, kind: str, name: str, spec: str) -> Any:
    """Create from JSON text (json.dumps cannot write what is nested this deep)."""
    head = {"apiVersion": "wayline.dev/v1alpha1", "kind": kind, "metadata": {"name": name}}
    path.write_text(json.dumps(head)[:-1] + f', "spec": {spec}}}')
    return on.kubectl("create", "-f", str(path), check=False)


async def test_one_deeply_nested_resource_does_not_take_the_operator_down(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The API server stores JSON nested up to 10,000 levels; kopf reads its watch with
    Python's json, whose recursion limit (1,000) made one such WorkflowRun (or WorkflowHook)
    fail the watcher and so the whole operator: no other resource was served again, and a
    restarted operator failed the same way (a crash loop)."""
    deep = "[" * DEPTH + "]" * DEPTH
    spec = f'{{"token": "tok-deep", "payload": {deep}}}'
    made = _create_raw(cluster, tmp_path / "hook.json", "WorkflowHook", "deep-hook", spec)
    assert made.returncode == 0, made.stderr
    spec = f'{{"workflow": "nobody_serves_this", "input": {deep}}}'
    made = _create_raw(cluster, tmp_path / "run.json", "WorkflowRun", "deep-run", spec)
    assert made.returncode == 0, made.stderr
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("after", {"workflow": "chain", "input": [4]}).returncode == 0
        status = await cluster.status_when("after", "completed", timeout=30)
    assert status["output"] == 6
    assert cluster.operator.proc is not None and cluster.operator.proc.poll() is None

    async def hook_waits() -> bool:  # by jsonpath: this process's json cannot read it either
        done = await asyncio.to_thread(
            cluster.kubectl, "get", "wfh", "deep-hook", "-o", "jsonpath={.status.phase}"
        )
        return bool(done.stdout == "waiting")

    await wait_for(hook_waits, timeout=20, interval=0.3)
    log = cluster.operator.log.read_text()
    assert "RecursionError" not in log, log[-2000:]


async def test_a_finished_runs_status_observes_an_edited_spec(
    cluster: Cluster,  # noqa: F811
) -> None:
    """A controller that has seen a spec says so in ``status.observedGeneration`` (kstatus,
    which Flux and ``kubectl``-based rollouts wait with, reads a resource whose
    observedGeneration lags its generation as still in progress). Adding a TTL to a run that
    ended (or setting cancel on it) left the status at the old generation for good."""
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("done", {"workflow": "chain", "input": [2]}).returncode == 0
        await cluster.status_when("done", "completed")
    ttl = '{"spec":{"ttlSecondsAfterFinished":3600}}'
    cluster.kubectl("patch", "wfr", "done", "--type=merge", "-p", ttl)

    async def observed() -> bool:
        body = await asyncio.to_thread(cluster.get, "done")
        return bool(body["status"].get("observedGeneration") == body["metadata"]["generation"])

    await wait_for(observed, timeout=15, interval=0.3)
    body = cluster.get("done")
    generation = body["metadata"]["generation"]
    assert generation == 2
    assert {c["observedGeneration"] for c in body["status"]["conditions"]} == {generation}
    assert body["status"]["phase"] == "completed"


async def test_a_status_tampered_with_is_put_right_after_a_restart(
    cluster: Cluster,  # noqa: F811
) -> None:
    """The status is the operator's mirror of the log: one written by someone else
    (``kubectl patch --subresource=status``) is put right. A live run's status set to
    ``failed`` stayed so after an operator restart (or a peering handover), even once the run
    completed: a status that looks terminal is never read against the world again."""
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("w", {"workflow": "kid_waits", "input": "tok-t"}).returncode == 0
        running = await cluster.status_when("w", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-t"))
        forged = '{"status":{"phase":"failed","message":"forged"}}'
        cluster.kubectl("patch", "wfr", "w", "--subresource=status", "--type=merge", "-p", forged)
        cluster.operator.stop(signal.SIGKILL)
        cluster.operator.start()
        await cluster.client.resume_hook("tok-t", 5)
        info = await cluster.client.handle(running["runId"]).result(timeout=20)
        assert info == 5
        status = await cluster.status_when("w", "completed", timeout=20)
    assert status["output"] == 5 and status["message"] != "forged"


async def test_a_live_runs_status_tampered_with_is_put_right_while_the_operator_runs(
    cluster: Cluster,  # noqa: F811
) -> None:
    """The same lie told to the operator that wrote the status: it compared each sync with
    what it had written itself, not with what the resource says, so a live run patched to
    ``failed`` stayed ``failed`` (``kubectl wait`` on it believed it) until the run moved, and
    a status removed stayed removed."""
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("l", {"workflow": "kid_waits", "input": "tok-l"}).returncode == 0
        await cluster.status_when("l", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-l"))
        forged = '{"status":{"phase":"failed","message":"forged"}}'
        cluster.kubectl("patch", "wfr", "l", "--subresource=status", "--type=merge", "-p", forged)
        status = await cluster.status_when("l", "running", timeout=10)
        assert status["message"] != "forged"
        await cluster.client.resume_hook("tok-l", 3)
        status = await cluster.status_when("l", "completed", timeout=20)
    assert status["output"] == 3
    # the status removed: kopf started the run again (a no-op), and it stayed empty for good
    wipe = '[{"op":"remove","path":"/status"}]'
    cluster.kubectl("patch", "wfr", "l", "--subresource=status", "--type=json", "-p", wipe)
    status = await cluster.status_when("l", "completed", timeout=10)
    assert status["output"] == 3


async def test_a_corrupt_run_is_blocked_in_its_conditions_and_says_so_in_an_event(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A run whose log cannot be read shows ``phase: corrupt``, but its conditions were left
    as they were (here ``Blocked`` by ``WaitingForHook``, elsewhere ``Progressing=True``) and
    no Event said anything: ``kubectl describe``, ``kubectl wait --for=condition=...`` and an
    alert on conditions never learnt that the run needs a repair."""
    from tests.hostile import flows as hostile
    from tests.hostile.poison import poison_log

    path = str(tmp_path / "count")
    async with wayline.Worker(cluster.world, [hostile.gated], settings=settings()):
        assert cluster.apply("p", {"workflow": "gated", "input": [path, "c-tok"]}).returncode == 0
        running = await cluster.status_when("p", "running")
        await wait_for(lambda: cluster.world.get_hook("c-tok"))
        await poison_log(cluster.world, running["runId"], b"\xff garbage")
        status = await cluster.status_when("p", "corrupt")
    conditions = {c["type"]: c for c in status["conditions"]}
    blocked = conditions["Blocked"]
    assert blocked["status"] == "True" and conditions["Progressing"]["status"] == "False"
    assert "corrupt" in f"{blocked['reason']} {blocked['message']}".lower(), blocked
    event = await cluster.event_when("p", blocked["reason"])
    assert event["type"] == "Warning"


async def test_two_hooks_racing_for_one_token_and_an_oversized_payload(
    cluster: Cluster,  # noqa: F811
) -> None:
    """Two WorkflowHooks applied at once for one token: each says delivered exactly when its
    payload is in the log (once), or failed; a payload over the world's limit
    (``WAYLINE_MAX_HOOK_PAYLOAD_BYTES``) fails its resource and leaves the hook open."""
    from wayline._core.events import EventType

    cluster.operator.stop()
    cluster.operator.env["WAYLINE_MAX_HOOK_PAYLOAD_BYTES"] = "262144"
    cluster.operator.start()
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("two", {"workflow": "kid_waits", "input": "tok-2"}).returncode == 0
        run = await cluster.status_when("two", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-2"))
        big = {"token": "tok-2", "payload": "x" * (300 * 1024)}
        manifest = {
            "apiVersion": "wayline.dev/v1alpha1",
            "kind": "WorkflowHook",
            "metadata": {"name": "big"},
            "spec": big,
        }
        path = Path(cluster.plane.kubeconfig).parent / f"{cluster.namespace}-big.json"
        path.write_text(json.dumps(manifest))
        assert cluster.kubectl("create", "-f", str(path), check=False).returncode == 0
        refused = await cluster.status_when("big", "failed", kind="workflowhook")
        assert refused["message"]
        assert cluster.get("two")["status"]["phase"] == "running"
        both = [
            asyncio.to_thread(
                cluster.apply, name, {"token": "tok-2", "payload": name}, "WorkflowHook"
            )
            for name in ("h1", "h2")
        ]
        assert [d.returncode for d in await asyncio.gather(*both)] == [0, 0]
        done = await cluster.status_when("two", "completed")
        phases = {}
        for name in ("h1", "h2"):

            async def settled(name: str = name) -> str | None:
                status = await asyncio.to_thread(lambda: cluster.get(name, "wfh").get("status"))
                phase = (status or {}).get("phase")
                return phase if phase in ("delivered", "failed") else None

            phases[name] = await wait_for(settled, timeout=20, interval=0.3)
    received = [
        e
        for e in await cluster.world.list_events(run["runId"])
        if e.type is EventType.HOOK_RECEIVED
    ]
    # a hook takes any number of payloads until its run ends (the second waits for a second
    # `await`): a resource says delivered exactly when its payload is in the log, once
    delivered = sorted(n for n, p in phases.items() if p == "delivered")
    assert sorted(e.data["payload"] for e in received) == delivered
    assert len({e.data["deliveryId"] for e in received}) == len(received)
    assert done["output"] == received[0].data["payload"]
    assert "Traceback" not in cluster.operator.log.read_text()


async def test_the_api_server_restarted_while_runs_progress(
    cluster: Cluster,  # noqa: F811
) -> None:
    """The API server crashes and comes back (an upgrade of the control plane): what the runs
    did meanwhile reaches their statuses, a resource created after it starts its run, and the
    operator process stays up."""
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        for name in ("a0", "a1"):
            assert (
                cluster.apply(name, {"workflow": "kid_waits", "input": f"tok-{name}"}).returncode
                == 0
            )
        for name in ("a0", "a1"):
            await cluster.status_when(name, "running")
            await wait_for(lambda name=name: cluster.world.get_hook(f"tok-{name}"))
        cluster.plane.kill_apiserver()
        try:
            await cluster.client.resume_hook("tok-a0", 0)
            await asyncio.sleep(3)  # the operator's writes and watches fail meanwhile
        finally:
            cluster.plane.start_apiserver()  # blocks this loop for its start (a few seconds)
        assert (await cluster.status_when("a0", "completed", timeout=30))["output"] == 0
        assert cluster.apply("after", {"workflow": "chain", "input": [3]}).returncode == 0
        assert (await cluster.status_when("after", "completed", timeout=40))["output"] == 3
        await cluster.client.resume_hook("tok-a1", 1)
        assert (await cluster.status_when("a1", "completed", timeout=20))["output"] == 1
    assert cluster.operator.proc is not None and cluster.operator.proc.poll() is None
