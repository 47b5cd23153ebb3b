"""What a Kubernetes user sees of a run with kubectl alone, on a real kube-apiserver + etcd
and on both worlds: Events (``kubectl describe``), ``status.waitingFor``, the printer
columns, conditions, and the ``terminate`` and ``ttlSecondsAfterFinished`` fields."""

# ruff: noqa: F811 - the fixtures imported from test_workflowrun are parameters here

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.definitions import workflows_by_name
from wayline._core.events import EventType
from wayline.world.registry import served_entries


def _condition(status: dict[str, object], kind: str) -> dict[str, object]:
    conds = status["conditions"]
    assert isinstance(conds, list)
    found: dict[str, object] = next(c for c in conds if c["type"] == kind)
    return found


AGE = r"\d+(s|m\d*s?)"
"""A short age or duration as kubectl prints it: ``4s``, ``1m``, ``1m3s``."""


def _columns(printed: str) -> dict[str, str]:
    """The one row of ``kubectl get``, by column (an empty cell is ``""``)."""
    header, row = printed.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends, strict=True)}


async def test_describe_tells_the_runs_story(cluster: Cluster, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("retry", {"workflow": "retrying", "input": [log, 1]})
        cluster.apply("fail", {"workflow": "fails"})
        cluster.apply("wait", {"workflow": "kid_waits", "input": "tok-d"})
        await cluster.status_when("retry", "completed")
        failed = await cluster.status_when("fail", "failed")
        waiting = await cluster.status_when("wait", "running")

        async def hook_seen() -> dict[str, object] | None:
            status = await asyncio.to_thread(lambda: cluster.get("wait").get("status") or {})
            return status if status.get("waitingFor") else None

        waiting = await wait_for(hook_seen, timeout=20)
        [hook] = waiting["waitingFor"]
        assert hook == {"kind": "hook", "token": "tok-d", "hookId": hook["hookId"]}
        blocked = _condition(waiting, "Blocked")
        assert (blocked["status"], blocked["reason"]) == ("True", "WaitingForHook")
        assert _condition(waiting, "Progressing")["status"] == "False"
        resource = cluster.get("wait")
        assert blocked["observedGeneration"] == resource["metadata"]["generation"]
        printed = cluster.kubectl("get", "wfr", "wait").stdout
        header, row = printed.splitlines()
        assert header.split() == [
            "NAME",
            "WORKFLOW",
            "PHASE",
            "STEPS",
            "WAITING-FOR",
            "STARTED",
            "ENDED",
            "AGE",
        ]
        assert "hook tok-d" in row and "kid_waits" in row
        # kubectl computes the ages of the date columns itself: a live run's time running
        # is STARTED's age, nothing the operator writes (so nothing freezes between writes)
        shown = _columns(printed)
        assert re.fullmatch(AGE, shown["STARTED"]), printed
        assert shown["ENDED"] == "" and waiting["duration"] == "", printed
        wide = cluster.kubectl("get", "wfr", "wait", "-o", "wide").stdout
        assert waiting["runId"] in wide and "deliver it with a WorkflowHook" in wide
        event = await cluster.event_when("wait", "WaitingForHook")
        assert "tok-d" in event["message"]
        await cluster.event_when("wait", "RunStarted")
        cluster.apply("yes", {"token": "tok-d", "payload": 1}, "WorkflowHook")
        done = await cluster.status_when("wait", "completed")
        await cluster.event_when("yes", "Delivered")
    assert done["waitingFor"] == [] and done["progress"] == "0/0"
    assert re.fullmatch(AGE, done["duration"]), done
    assert re.fullmatch(AGE, _columns(cluster.kubectl("get", "wfr", "wait").stdout)["ENDED"])
    columns = cluster.kubectl("get", "crd", "workflowruns.wayline.dev", "-o", "json").stdout
    [version] = json.loads(columns)["spec"]["versions"]
    dates = {c["name"] for c in version["additionalPrinterColumns"] if c["type"] == "date"}
    assert dates == {"Started", "Ended", "Age"}
    succeeded = _condition(done, "Succeeded")
    assert succeeded["status"] == "True"
    before = _condition(waiting, "Succeeded")["lastTransitionTime"]
    assert _condition(done, "Blocked")["lastTransitionTime"] >= str(before)
    await cluster.event_when("wait", "RunSucceeded")
    retried = await cluster.event_when("retry", "StepRetrying")
    assert "transient failure 1" in retried["message"] and "flaky" in retried["message"]
    assert retried["type"] == "Warning"
    assert cluster.get("retry")["status"]["progress"] == "1/1"
    fail = await cluster.event_when("fail", "RunFailed")
    assert "card declined" in fail["message"] and failed["error"]["code"] in fail["message"]
    reasons = [e["reason"] for e in cluster.events("wait")]
    assert reasons.count("RunStarted") == 1 and reasons.count("WaitingForHook") == 1


async def test_an_unknown_workflow_says_no_worker_serves_it(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("typo", {"workflow": "chian", "input": [1]})

        async def blocked() -> dict[str, object] | None:
            status = await asyncio.to_thread(lambda: cluster.get("typo").get("status") or {})
            return status if status.get("waitingFor") else None

        status = await wait_for(blocked, timeout=20)
    [worker] = status["waitingFor"]
    assert worker["kind"] == "worker" and worker["workflow"] == "chian"
    assert "'chian'" in status["message"]
    condition = _condition(status, "Blocked")
    assert (condition["status"], condition["reason"]) == ("True", "WaitingForWorker")
    event = await cluster.event_when("typo", "WaitingForWorker")
    assert "'chian'" in event["message"] and event["type"] == "Warning"
    assert "worker (chian)" in cluster.kubectl("get", "wfr", "typo").stdout


async def test_a_run_no_registered_worker_serves_waits_for_one_until_one_registers(
    cluster: Cluster,
) -> None:
    """No worker has registered ``chain`` in this world: its run says so from its first
    status (no grace period); when a worker's heartbeat registers the workflow the wait clears
    although the run has not moved yet; a worker then runs it."""
    cluster.apply("early", {"workflow": "chain", "input": [2]})

    async def first() -> dict[str, object] | None:
        status = await asyncio.to_thread(lambda: cluster.get("early").get("status") or {})
        return status if status.get("runId") else None

    status = await wait_for(first, timeout=20)
    assert status["phase"] == "pending"
    [worker] = status["waitingFor"]
    assert worker["kind"] == "worker" and worker["workflow"] == "chain"
    assert "waiting_for_worker" in str(status["message"]) and "'chain'" in str(status["message"])
    blocked = _condition(status, "Blocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "WaitingForWorker")
    event = await cluster.event_when("early", "WaitingForWorker")
    assert "'chain'" in event["message"]
    # what a worker's heartbeat records, without a worker consuming: the run does not move
    served = served_entries(workflows_by_name([flows.chain]).values(), None, "w-early", 60.0)
    await cluster.world.record_served(served)

    async def cleared() -> dict[str, object] | None:
        status = await asyncio.to_thread(lambda: cluster.get("early").get("status") or {})
        return status if _condition(status, "Blocked")["status"] == "False" else None

    status = await wait_for(cleared, timeout=20)
    assert status["phase"] == "pending" and status["waitingFor"] == []
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        done = await cluster.status_when("early", "completed")
    assert done["output"] == 1  # 0 + 0, then + 1
    reasons = [e["reason"] for e in cluster.events("early")]
    assert reasons.count("WaitingForWorker") == 1


async def test_terminate_stops_the_run_without_compensations(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("t1", {"workflow": "saga_waits", "input": [log, "o1"]})
        await wait_for(lambda: cluster.world.get_hook("saga:o1"))
        patch = '{"spec":{"terminate":true}}'
        cluster.kubectl("patch", "wfr", "t1", "--type=merge", "-p", patch)
        status = await cluster.status_when("t1", "cancelled")
        await cluster.event_when("t1", "RunTerminated")
        await asyncio.sleep(1.0)  # time for a (wrong) unwind to run
        undo = cluster.kubectl(
            "patch", "wfr", "t1", "--type=merge", "-p", '{"spec":{"terminate":false}}', check=False
        )
    assert undo.returncode != 0 and "un-terminated" in undo.stderr
    done = flows.lines(log)
    assert [line.split(" key=")[0] for line in done] == ["reserve o1", "charge o1"]  # no undo
    events = await cluster.world.list_events(status["runId"])
    assert not any(e.type is EventType.RUN_COMPENSATING for e in events)
    assert events[-1].data["terminated"] is True


async def test_a_finished_run_deletes_its_resource_after_its_ttl(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        # long enough for the test to see the completed status before the resource goes
        cluster.apply("brief", {"workflow": "chain", "input": [2], "ttlSecondsAfterFinished": 6})
        status = await cluster.status_when("brief", "completed")

        async def gone() -> bool:
            done = await asyncio.to_thread(cluster.kubectl, "get", "wfr", "brief", check=False)
            return done.returncode != 0 and "NotFound" in done.stderr

        await wait_for(gone, timeout=40)
    info = await cluster.world.get_run(status["runId"])
    assert info is not None and str(info.status) == "completed"  # history stays in the world
    assert json.dumps(status)


async def test_an_event_posted_again_is_not_shown_twice(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Event about a log entry is named after it: posting it again (a retried sync, a
    replica taking over, an HTTP retry after a create that reached etcd) creates nothing, and
    ``kubectl describe`` shows it once."""
    from wayline_operator import kube
    from wayline_operator.handlers import SOURCE

    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("wait", {"workflow": "kid_waits", "input": "tok-e"})
        posted = await cluster.event_when("wait", "WaitingForHook")
    resource = cluster.get("wait")
    uid = resource["metadata"]["uid"]
    events = await cluster.world.list_events(resource["status"]["runId"])
    [hook] = [e for e in events if e.type is EventType.HOOK_CREATED]
    name = kube.event_name("wait", uid, str(hook.seq), "WaitingForHook")
    assert posted["metadata"]["name"] == name
    assert posted["source"]["component"] == SOURCE
    import kubernetes

    config = kubernetes.client.Configuration()  # this process's client, on the test's cluster
    kubernetes.config.load_kube_config(str(cluster.plane.kubeconfig), client_configuration=config)
    api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(config))
    monkeypatch.setattr(kube, "_api", api)
    monkeypatch.setattr(kube, "_core", None)
    again = kube.event_body(resource, "Normal", "WaitingForHook", posted["message"], name, SOURCE)
    assert await kube.create_event(again) is False
    reasons = [e["reason"] for e in cluster.events("wait")]
    assert reasons.count("WaitingForHook") == 1 and reasons.count("RunStarted") == 1


async def test_a_cancelled_run_counts_its_compensations_apart_from_its_steps(
    cluster: Cluster, tmp_path: Path
) -> None:
    """STEPS is forward steps completed / created: an unwound run's compensations made it
    read 4/2 (each compensation counted as a completed step)."""
    log = str(tmp_path / "log")
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("unwound", {"workflow": "saga_waits", "input": [log, "o1"]})
        await wait_for(lambda: cluster.world.get_hook("saga:o1"), timeout=20)
        patch = '{"spec":{"cancel":true}}'
        cluster.kubectl("patch", "wfr", "unwound", "--type=merge", "-p", patch)
        status = await cluster.status_when("unwound", "cancelled", timeout=30)
    marks = flows.lines(log)
    assert marks.count("release o1") == 1
    assert len([m for m in marks if m.startswith("refund o1")]) == 1
    counts = {k: v for k, v in status["steps"].items() if k != "live"}
    assert counts == {"created": 2, "completed": 2, "failed": 0, "compensations": 2}
    assert status["progress"] == "2/2"
    assert _columns(cluster.kubectl("get", "wfr", "unwound").stdout)["STEPS"] == "2/2"


async def test_the_first_run_after_a_fresh_install_does_not_wait_for_a_ready_worker(
    cluster: Cluster,
) -> None:
    """A fresh installation: the operator starts before any worker (it read an empty
    registry then) and sees no WorkflowRun for a while. The first run, applied once the
    worker is up, got a WaitingForWorker Warning from that first, stale read."""

    async def operator_up() -> bool:
        log = await asyncio.to_thread(cluster.operator.log.read_text)
        return "Activity 'startup' succeeded" in log

    await wait_for(operator_up, timeout=30, interval=0.2)
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        await asyncio.sleep(2.5)  # the worker is up, and the operator's read is over 2 s old
        cluster.apply("first", {"workflow": "kid_waits", "input": "tok-first"})
        await cluster.event_when("first", "WaitingForHook")
        status = await cluster.status_when("first", "running")
        await cluster.client.resume_hook("tok-first", "ok")
        await cluster.status_when("first", "completed")
    assert not [w for w in status.get("waitingFor") or [] if w["kind"] == "worker"], status
    reasons = [e["reason"] for e in cluster.events("first")]
    assert "WaitingForWorker" not in reasons, reasons
