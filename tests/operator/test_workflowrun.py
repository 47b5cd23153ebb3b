"""WorkflowRun end to end on a real kube-apiserver + etcd: the operator (in its own process,
as its pod runs it) and a worker share a world (SQLite, or a real nats-server), and
everything is driven with kubectl."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.operator.zygote import Forked, zygote
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from tests.servers import dying_with_us
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.world.business_ids import generation_run_id
from wayline.worlds.local import LocalWorld

CRDS = Path(__file__).resolve().parents[2] / "crds"
APPS = [
    flows.chain,
    flows.kid_waits,
    flows.saga_stuck,
    flows.saga_waits,
    flows.retrying,
    flows.fails,
]


#: The project's kinds, by the names tests give ``Cluster.get``, and their resources' plurals.
PLURALS = {
    name: plural
    for plural, names in {
        "workflowruns": ("workflowrun", "workflowruns", "wfr"),
        "workflowhooks": ("workflowhook", "workflowhooks", "wfh"),
        "workflowschedules": ("workflowschedule", "workflowschedules", "wfs"),
        "workflowworkers": ("workflowworker", "workflowworkers", "wfw"),
    }.items()
    for name in names
}


@dataclass
class Cluster:
    plane: Any
    namespace: str
    world: wayline.World
    client: wayline.Client
    operator: Operator

    def kubectl(self, *args: str, check: bool = True) -> Any:
        done = self.plane.kubectl("-n", self.namespace, *args)
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def apply(self, name: str, spec: dict[str, Any], kind: str = "WorkflowRun") -> Any:
        manifest = {
            "apiVersion": "wayline.dev/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        path = Path(self.plane.kubeconfig).parent / f"{self.namespace}-{name}.json"
        path.write_text(json.dumps(manifest))
        return self.kubectl("apply", "-f", str(path), check=False)

    def events(self, name: str) -> list[dict[str, Any]]:
        """The Kubernetes Events on one object, oldest first (what kubectl describe shows),
        read in this process."""
        selector = urllib.parse.quote(f"involvedObject.name={name}")
        path = f"/api/v1/namespaces/{self.namespace}/events?fieldSelector={selector}"
        code, body = self.plane.read(path)
        assert code == 200, f"GET {path}: HTTP {code}: {body.get('message')}"
        items: list[dict[str, Any]] = body["items"]
        return sorted(items, key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or "")

    async def event_when(self, name: str, reason: str, timeout: float = 20) -> dict[str, Any]:
        async def posted() -> dict[str, Any] | None:
            found = await asyncio.to_thread(self.events, name)
            return next((e for e in found if e.get("reason") == reason), None)

        event: dict[str, Any] = await wait_for(posted, timeout=timeout, interval=0.3)
        return event

    def get(self, name: str, kind: str = "workflowrun") -> dict[str, Any]:
        """The object as ``kubectl get KIND NAME -o json`` prints it; read in this process for
        the project's own kinds (polled for a status many times a test)."""
        plural = PLURALS.get(kind)
        if plural is None:
            return json.loads(self.kubectl("get", kind, name, "-o", "json").stdout)
        path = f"/apis/wayline.dev/v1alpha1/namespaces/{self.namespace}/{plural}/{name}"
        code, body = self.plane.read(path)
        assert code == 200, f"GET {path}: HTTP {code}: {body.get('reason')}: {body.get('message')}"
        return body

    async def status_when(
        self, name: str, phase: str, timeout: float = 20, kind: str = "workflowrun"
    ) -> dict[str, Any]:
        async def reached() -> dict[str, Any] | None:
            status = await asyncio.to_thread(lambda: self.get(name, kind).get("status") or {})
            return status if status.get("phase") == phase else None

        found: dict[str, Any] = await wait_for(reached, timeout=timeout, interval=0.2)
        return found


@pytest.fixture(scope="module")
def crd_applied(control_plane: Any, crds_established: None) -> None:
    """The CRDs (once a session: ``crds_established``) and, for each module, the input
    policy acting: a module before may have deleted it and had ``helm install`` make it
    again (tests/operator/test_input_policy_edges.py)."""
    _wait_for_the_input_policy(control_plane)


def _wait_for_the_input_policy(control_plane: Any, timeout: float = 30.0) -> None:
    """The admission policy that keeps a run's input acts a moment after it is created: edit a
    probe run (in ``default``, which no test's operator watches) until it is refused."""
    probe = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": "input-policy-probe", "namespace": "default"},
        "spec": {"workflow": "probe", "input": 1},
    }
    made = control_plane.kubectl("create", "-f", "-", input=json.dumps(probe))
    assert made.returncode == 0, made.stderr
    deadline = time.monotonic() + timeout
    try:
        for value in itertools.count(2):  # each edit a change: an unchanged input passes
            edit = control_plane.kubectl(
                *("patch", "wfr", "input-policy-probe", "-n", "default", "--type=merge"),
                *("-p", json.dumps({"spec": {"input": value}})),
            )
            if edit.returncode != 0:
                assert "input cannot change" in edit.stderr, edit.stderr
                return
            assert time.monotonic() < deadline, "the input policy never refused an edit"
            time.sleep(0.2)
    finally:
        control_plane.kubectl("delete", "wfr", "input-policy-probe", "-n", "default")


def _kubeconfig_env(world_url: str, kubeconfig: Path) -> dict[str, str]:
    """The operator process's environment: the world, the cluster, and fast test cadences."""
    return {
        **os.environ,
        "WAYLINE_WORLD": world_url,
        "KUBECONFIG": str(kubeconfig),
        "WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS": "0.2",
        "WAYLINE_OPERATOR_SWEEP_SECONDS": "0.5",
        "WAYLINE_OPERATOR_HOOK_RETRY_SECONDS": "0.5",
        # below what the API server stores (the default, 64 MiB, is for the worlds), so that
        # the operator's own refusal of an oversized spec.input can be reached
        "WAYLINE_MAX_INPUT_BYTES": "262144",
    }


class Operator:
    """The operator as its pod runs it: ``python -m wayline_operator``, in a process of its
    own (so a test can SIGKILL it), watching one namespace."""

    def __init__(self, namespace: str, env: dict[str, str], log: Path) -> None:
        self.namespace, self.env, self.log = namespace, env, log
        self.proc: subprocess.Popen[bytes] | Forked | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "wayline_operator", "--namespace", self.namespace]

    def start(self) -> None:
        """Started so that it dies with this process: a test run killed mid-way (which runs
        no fixture teardown) leaves no operator behind. ``python -m`` commands are forked
        from this test process's zygote (tests/operator/zygote.py), which imported the
        operator's libraries once (``WAYLINE_TEST_OPERATOR_ZYGOTE=0``: a new process each
        time, as before); anything else is a new process as it is, and so is a command whose
        environment a forked child would not have (``forkable``: a ``PYTHON*`` variable or
        ``WAYLINE_CODEC`` other than the zygote's, read when its interpreter started)."""
        command = self.command()
        forked = os.environ.get("WAYLINE_TEST_OPERATOR_ZYGOTE", "1") != "0"
        if (
            forked
            and command[:2] == [sys.executable, "-m"]
            and zygote().forkable(self.env, command)
        ):
            # the log exists once start returns, as with a new process: the forked child opens
            # it for itself later, and a test may read it before the child has
            self.log.touch()
            self.proc = zygote().spawn(command, self.env, self.log)
            return
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                dying_with_us(command),
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(params=["local", "nats"])
async def cluster(
    request: pytest.FixtureRequest,
    control_plane: Any,
    crd_applied: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Cluster]:
    """The operator process and this test's worker on one world: a SQLite file, or a prefix
    on the session's real nats-server (as in a cluster)."""
    namespace = f"t-{uuid.uuid4().hex[:10]}"  # never deleted: no namespace controller here
    world: wayline.World
    if request.param == "local":
        url = f"sqlite:///{tmp_path / 'wayline.db'}"
        world = LocalWorld(tmp_path / "wayline.db", poll_interval=0.01)
    else:
        server = request.getfixturevalue("nats_server")
        url = f"{server.url}?prefix={namespace.replace('-', '')}"
        world = wayline.open_world(url)
    monkeypatch.setenv("WAYLINE_WORLD", url)
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig))
    done = control_plane.kubectl("create", "namespace", namespace)
    assert done.returncode == 0, done.stderr
    await world.start()
    env = _kubeconfig_env(url, control_plane.kubeconfig)
    operator = Operator(namespace, env, tmp_path / "operator.log")
    operator.start()
    try:
        yield Cluster(control_plane, namespace, world, wayline.Client(world), operator)
    finally:
        operator.stop()
        await world.close()


async def test_applying_a_workflowrun_runs_it_once_and_mirrors_it(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("sum", {"workflow": "chain", "input": [4]}).returncode == 0
        status = await cluster.status_when("sum", "completed")
    assert status["output"] == 6 and status["steps"]["completed"] == 4
    assert status["runId"] == generation_run_id("sum", cluster.namespace, 0)
    assert status["conditions"][0]["status"] == "True"
    assert [r.run_id for r in await cluster.client.list_runs()] == [status["runId"]]
    printed = cluster.kubectl("get", "wfr", "sum").stdout
    assert "chain" in printed and "completed" in printed  # the printer columns


async def test_the_api_server_refuses_bad_specs(cluster: Cluster) -> None:
    missing = cluster.apply("bad1", {"input": [1]})
    assert missing.returncode != 0 and "workflow" in missing.stderr
    extra = cluster.apply("bad2", {"workflow": "chain", "resumes": 1})
    assert extra.returncode != 0 or "unknown field" in extra.stderr
    negative = cluster.apply("bad3", {"workflow": "chain", "compensation": {"resumes": -1}})
    assert negative.returncode != 0 and "resumes" in negative.stderr
    created = cluster.apply("ok", {"workflow": "kid_waits", "input": "tok-ok", "cancel": True})
    assert created.returncode == 0, created.stderr
    again = cluster.apply("ok", {"workflow": "kid_waits", "input": "tok-ok", "cancel": False})
    assert again.returncode != 0 and "un-cancelled" in again.stderr
    renamed = cluster.apply("ok", {"workflow": "chain", "input": "tok-ok", "cancel": True})
    assert renamed.returncode != 0 and "cannot change" in renamed.stderr


async def test_an_operator_restart_starts_no_second_run(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("waits", {"workflow": "kid_waits", "input": "tok-r"}).returncode == 0
        await cluster.status_when("waits", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-r"))
        # the operator is killed and comes back: it resumes the resource, and the run
        cluster.operator.stop(signal.SIGKILL)
        cluster.operator.start()
        await asyncio.sleep(3.0)  # time to resume (and, were it wrong, to start another)
        assert len(await cluster.client.list_runs()) == 1
        await cluster.client.resume_hook("tok-r", {"ok": True})
        status = await cluster.status_when("waits", "completed")
    assert status["output"] == {"ok": True}
    assert len(await cluster.client.list_runs()) == 1


async def test_cancel_in_the_spec_and_deleting_the_resource_cancel_the_run(
    cluster: Cluster,
) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("c1", {"workflow": "kid_waits", "input": "tok-c1"})
        cluster.apply("c2", {"workflow": "kid_waits", "input": "tok-c2"})
        first = await cluster.status_when("c1", "running")
        second = await cluster.status_when("c2", "running")
        cluster.kubectl("patch", "wfr", "c1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
        await cluster.status_when("c1", "cancelled")
        cluster.kubectl("delete", "wfr", "c2", "--timeout=20s")  # no finalizer: gone at once
        gone = cluster.kubectl("get", "wfr", "c2", check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr

        async def cancelled() -> bool:
            info = await cluster.world.get_run(second["runId"])
            return info is not None and info.status is RunStatus.CANCELLED

        await wait_for(cancelled)
    info = await cluster.world.get_run(first["runId"])
    assert info is not None and info.status is RunStatus.CANCELLED


async def test_spec_paused_pauses_the_run_and_clearing_it_lets_the_run_go_on(
    cluster: Cluster,
) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("p1", {"workflow": "kid_waits", "input": "tok-p1"})
        running = await cluster.status_when("p1", "running")
        await cluster.client.wait_for_hook("tok-p1", timeout=20)
        cluster.kubectl("patch", "wfr", "p1", "--type=merge", "-p", '{"spec":{"paused":true}}')
        paused = await cluster.status_when("p1", "paused")
        blocked = next(c for c in paused["conditions"] if c["type"] == "Blocked")
        assert (blocked["status"], blocked["reason"]) == ("True", "Paused")
        assert "paused by operator: spec.paused set on its WorkflowRun" in blocked["message"]
        event = await cluster.event_when("p1", "Paused")
        assert event["type"] == "Warning" and "by operator" in event["message"]
        # a payload is kept while paused; the run takes it up only once unpaused
        await cluster.client.resume_hook("tok-p1", {"ok": True})
        info = await cluster.client.get_run(running["runId"])
        assert info.status is RunStatus.PAUSED
        cluster.kubectl("patch", "wfr", "p1", "--type=merge", "-p", '{"spec":{"paused":false}}')
        status = await cluster.status_when("p1", "completed")
        await cluster.event_when("p1", "Unpaused")
    assert status["output"] == {"ok": True}
    events = await cluster.client.world.list_events(running["runId"])
    kinds = [e.type for e in events]
    assert kinds.index(EventType.RUN_UNPAUSED) < kinds.index(EventType.RUN_COMPLETED)


async def test_a_stuck_unwind_is_resumed_or_abandoned_from_the_spec(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = str(tmp_path / "log")
    (tmp_path / flows.STUCK_FLAG).touch()
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("s1", {"workflow": "saga_stuck", "input": [log, "o1"]})
        stuck = await cluster.status_when("s1", "compensation_stuck")
        [person] = stuck["waitingFor"]
        assert person["kind"] == "person" and person["step"] == "reserve_stuck"
        assert "warehouse offline" in person["error"]
        assert "spec.compensation.resumes" in person["message"]
        blocked = next(c for c in stuck["conditions"] if c["type"] == "Blocked")
        assert (blocked["status"], blocked["reason"]) == ("True", "CompensationStuck")
        event = await cluster.event_when("s1", "CompensationStuck")
        assert "reserve_stuck" in event["message"] and "warehouse offline" in event["message"]
        assert event["type"] == "Warning"
        await cluster.event_when("s1", "Compensating")
        bump = '{"spec":{"compensation":{"resumes":1}}}'
        cluster.kubectl("patch", "wfr", "s1", "--type=merge", "-p", bump)  # fails again
        await wait_for(lambda: _resumes(cluster, "s1", 1))
        await cluster.status_when("s1", "compensation_stuck")
        (tmp_path / flows.STUCK_FLAG).unlink()
        bump = '{"spec":{"compensation":{"resumes":2}}}'
        cluster.kubectl("patch", "wfr", "s1", "--type=merge", "-p", bump)
        status = await cluster.status_when("s1", "failed")
    assert status["compensationResumes"] == 2
    assert flows.lines(log).count("try release o1") == 3
    assert "no courier" in status["error"]["message"]


async def _resumes(cluster: Cluster, name: str, n: int) -> bool:
    status = await asyncio.to_thread(lambda: cluster.get(name).get("status") or {})
    return bool(status.get("compensationResumes", 0) >= n)


async def test_the_sweep_rearms_a_run_that_lost_its_wake(cluster: Cluster) -> None:
    """Recovery is automatic in a cluster too: the operator's sweep finds a live run with no
    wake coming (its messages lost) and re-arms it, with no worker restart."""
    async with wayline.Worker(cluster.world, APPS, settings=settings(), recover=False):
        lost = new_run_id()
        await cluster.world.append(
            lost,
            [NewEvent(EventType.RUN_CREATED, data={"workflow": "chain", "input": {"args": [3]}})],
        )
        assert await cluster.client.handle(lost).result(timeout=20) == 3


async def test_a_workflowhook_delivers_its_payload_once(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("order", {"workflow": "kid_waits", "input": "tok-h"})
        run = await cluster.status_when("order", "running")
        await wait_for(lambda: cluster.world.get_hook("tok-h"))
        made = cluster.apply("approve", {"token": "tok-h", "payload": {"ok": 1}}, "WorkflowHook")
        assert made.returncode == 0, made.stderr
        waited = cluster.kubectl(
            "wait", "--for=condition=Delivered", "workflowhook/approve", "--timeout=30s"
        )
        assert "condition met" in waited.stdout
        hook = await cluster.status_when("approve", "delivered", kind="workflowhook")
        done = await cluster.status_when("order", "completed")
    assert hook["runId"] == run["runId"] and done["output"] == {"ok": 1}
    [delivered] = hook["conditions"]
    assert delivered["type"] == "Delivered" and delivered["status"] == "True"
    assert delivered["reason"] == "Delivered" and run["runId"] in delivered["message"]
    assert delivered["observedGeneration"] == hook["observedGeneration"] == 1
    assert delivered["lastTransitionTime"]
    received = [
        e
        for e in await cluster.world.list_events(run["runId"])
        if e.type is EventType.HOOK_RECEIVED
    ]
    assert len(received) == 1
    changed = cluster.apply("approve", {"token": "tok-h", "payload": {"ok": 2}}, "WorkflowHook")
    assert changed.returncode != 0 and "cannot change" in changed.stderr


async def test_a_workflowhook_waits_for_its_run_to_reach_the_hook(cluster: Cluster) -> None:
    early = cluster.apply("early", {"token": "tok-e", "payload": "yes"}, "WorkflowHook")
    assert early.returncode == 0, early.stderr
    waiting = await cluster.status_when("early", "waiting", kind="workflowhook")
    assert "tok-e" in waiting["message"]
    [not_yet] = waiting["conditions"]
    assert (not_yet["type"], not_yet["status"], not_yet["reason"]) == (
        "Delivered",
        "False",
        "WaitingForHook",
    )
    assert "tok-e" in not_yet["message"]
    event = await cluster.event_when("early", "Waiting")
    assert "tok-e" in event["message"]
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("late", {"workflow": "kid_waits", "input": "tok-e"})
        delivered = await cluster.status_when("early", "delivered", kind="workflowhook")
        done = await cluster.status_when("late", "completed")
    assert done["output"] == "yes"
    [now] = delivered["conditions"]
    assert (now["status"], now["reason"]) == ("True", "Delivered")
    assert now["lastTransitionTime"] >= not_yet["lastTransitionTime"]
    await cluster.event_when("early", "Delivered")
    assert [e["reason"] for e in cluster.events("early")].count("Waiting") == 1
    log = cluster.operator.log.read_text()
    assert "failed temporarily" not in log and "Timer 'redeliver' succeeded" not in log
    assert "Timer 'mirror' succeeded" not in log


async def test_a_workflowhook_whose_payload_does_not_validate_is_invalid(
    cluster: Cluster,
) -> None:
    from tests.runtime import sdk_flows

    async with wayline.Worker(cluster.world, [sdk_flows.approval_once], settings=settings()):
        cluster.apply("typed", {"workflow": "approval_once", "input": "op1"})
        await cluster.status_when("typed", "running")
        await wait_for(lambda: cluster.world.get_hook("approve:op1"))
        bad = {"token": "approve:op1", "payload": {"approved": True}}
        assert cluster.apply("bad", bad, "WorkflowHook").returncode == 0
        refused = await cluster.status_when("bad", "failed", kind="workflowhook")
        assert "by: Field required" in refused["message"]
        [never] = refused["conditions"]
        assert (never["type"], never["status"], never["reason"]) == (
            "Delivered",
            "False",
            "Refused",
        )
        assert "by: Field required" in never["message"]
        good = {"token": "approve:op1", "payload": {"approved": True, "by": "ana"}}
        assert cluster.apply("good", good, "WorkflowHook").returncode == 0
        await cluster.status_when("good", "delivered", kind="workflowhook")
        done = await cluster.status_when("typed", "completed")
    assert done["output"] == "ana"


async def test_a_step_waiting_for_a_concurrency_slot_shows_in_the_status(
    cluster: Cluster, tmp_path: Path
) -> None:
    from tests.runtime import slot_flows

    key = "step:slot_flows.render:*"
    for ghost in ("elsewhere:s1", "elsewhere:s2"):  # both slots held by others
        assert (await cluster.world.acquire_slot(key, ghost, 2, lease=60))[0]
    marks = str(tmp_path / "marks")
    async with wayline.Worker(cluster.world, [slot_flows.render_one], settings=settings()):
        spec = {"workflow": "slot_flows.render_one", "input": [marks, "op", 0.1]}
        assert cluster.apply("slot", spec).returncode == 0
        status = await cluster.status_when("slot", "blocked")
        [wait] = [w for w in status["waitingFor"] if w["kind"] == "concurrency"]
        assert (wait["name"], wait["stepId"], wait["limit"]) == ("slot_flows.render", "s1", key)
        assert "elsewhere:s1, elsewhere:s2" in wait["message"]
        assert status["waitingForSummary"].startswith("concurrency (slot_flows.render)")
        assert not [w for w in status["waitingFor"] if w["kind"] == "worker"]
        assert slot_flows.runs_of(marks, "op") == 0
        await cluster.world.release_slot(key, "elsewhere:s1")
        status = await cluster.status_when("slot", "completed")
    assert status["output"] == "op" and slot_flows.runs_of(marks, "op") == 1
