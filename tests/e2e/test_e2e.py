"""End to end with real pods: ``helm install`` of the chart (NATS StatefulSet on a persistent
volume, the operator, two worker pods), WorkflowRuns and WorkflowHooks created through the
``kubernetes`` client, pods killed and rolled with the API and kubectl.

Each test gets its own installation in its own namespace (tests/e2e/conftest.py); the cluster
is kind or the local one of tools/cluster (tests/e2e/clusters.py).
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.e2e.clusters import say
from tests.e2e.conftest import Release

pytestmark = pytest.mark.timeout(900)

ORDER = {
    "order_id": "o-1",
    "customer": "ada",
    "items": [{"sku": "BOOK-42", "quantity": 1, "unit_price_cents": 1250}],
}


def test_the_example_run_completes_after_its_hook(release: Release) -> None:
    release.create("WorkflowRun", "o-1", {"workflow": "orders", "input": ORDER})
    waiting = release.wait_phase(["o-1"], ("waiting", "running"), timeout=60)["o-1"]
    time.sleep(3)  # the run waits for its approval: it must not complete without it
    assert release.status("o-1").get("phase") != "completed", waiting
    release.create(
        "WorkflowHook",
        "approve-o-1",
        {"token": "approve:o-1", "payload": {"approved": True, "by": "grace"}},
    )
    status = release.wait_phase(["o-1"], ("completed",), timeout=120)["o-1"]
    assert status["output"]["status"] == "shipped" and status["output"]["approved_by"] == "grace"
    assert release.status("approve-o-1", "workflowhooks").get("phase") == "delivered"


def test_pods_run_non_root_on_a_read_only_root_and_pass_their_probes(release: Release) -> None:
    for component in ("operator", "worker", "nats"):
        for pod in release.pods(component):
            name = pod.metadata.name
            for c in pod.status.container_statuses:
                assert c.ready and c.restart_count == 0, (name, c)
            if component == "nats":  # an image of one binary: no shell to look inside
                continue
            probe = (
                "import getpass, os, pathlib\n"
                "print(os.getuid(), os.getgid(), getpass.getuser())\n"
                "try:\n    pathlib.Path('/probe').write_text('x')\n"
                "except OSError as e:\n    print(e.strerror)\n"
                "print(pathlib.Path('/var/run/secrets/kubernetes.io/serviceaccount').exists())\n"
            )
            lines = release.exec(name, "python", "-c", probe).splitlines()
            # the image has a passwd entry for its uid (kopf asks for a user name)
            assert lines[0] == "65532 65532 wayline", (name, lines)
            assert lines[1] == "Read-only file system", (name, lines)
            assert lines[2] == ("True" if component == "operator" else "False"), (name, lines)
    for pod in release.pods("worker"):  # the probes' own endpoints, as the kubelet sees them
        ip = pod.status.pod_ip
        check = (
            "import urllib.request\n"
            f"for p in ('/healthz', '/readyz'):\n"
            f"    print(urllib.request.urlopen('http://{ip}:8081' + p, timeout=5).status)\n"
        )
        assert release.exec(pod.metadata.name, "python", "-c", check).split() == ["200", "200"]


def test_a_worker_pod_force_deleted_mid_step_the_body_is_recovered_once(
    release: Release,
) -> None:
    release.run("kill-1", "marked", "kill-1", 8)
    deadline = time.monotonic() + 60
    while not (starts := release.marks("kill-1")["start"]):
        assert time.monotonic() < deadline, "the step body never started"
        time.sleep(0.5)
    victim = starts[0][0]
    release.kubectl("delete", "pod", victim, "--grace-period=0", "--force", "--wait=false")
    killed_at = time.time()
    status = release.wait_phase(["kill-1"], ("completed",), timeout=180)["kill-1"]
    assert status["output"] == "kill-1 done"
    marks = release.marks("kill-1")
    assert len(marks["start"]) == 2, marks  # the interrupted body, and one recovery
    assert len(marks["end"]) == 1, marks
    again = max(marks["start"], key=lambda m: m[1])[0]
    ended_by = marks["end"][0][0]
    assert again != victim and ended_by == again, marks
    second = max(at for _, at in marks["start"])
    assert second > killed_at, "a second body started while the first one's pod was alive"


def test_the_nats_pod_deleted_mid_run_and_every_run_completes(release: Release) -> None:
    keys = [f"nats-{i}" for i in range(4)]
    for key in keys:
        release.run(key, "marked", key, 6)
    deadline = time.monotonic() + 60
    while sum(bool(release.marks(k)["start"]) for k in keys) < len(keys):
        assert time.monotonic() < deadline, "not every body started"
        time.sleep(0.5)
    (nats,) = release.pods("nats")
    release.core.delete_namespaced_pod(nats.metadata.name, release.namespace)
    deadline = time.monotonic() + 120
    while True:  # the StatefulSet brings a new pod back, on the same volume
        pods = release.ready_pods("nats")
        if pods and pods[0].metadata.uid != nats.metadata.uid:
            break
        assert time.monotonic() < deadline, release.diagnose()
        time.sleep(1)
    statuses = release.wait_phase(keys, ("completed",), timeout=240)
    assert {k: s["output"] for k, s in statuses.items()} == {k: f"{k} done" for k in keys}
    runs = release.world_runs("marked")
    assert sorted(r["status"] for r in runs) == ["completed"] * len(keys), runs


def test_the_operator_pod_deleted_while_runs_are_created(release: Release) -> None:
    names = [f"op-{i}" for i in range(20)]
    created = threading.Event()

    def create_all() -> None:
        for i, name in enumerate(names):
            release.run(name, "quick", name)
            if i == 5:
                created.set()
            time.sleep(0.2)

    creator = threading.Thread(target=create_all)
    creator.start()
    assert created.wait(60)
    (operator,) = release.pods("operator")
    release.core.delete_namespaced_pod(operator.metadata.name, release.namespace)
    creator.join(120)
    statuses = release.wait_phase(names, ("completed",), timeout=240)
    run_ids = [s["runId"] for s in statuses.values()]
    assert len(set(run_ids)) == len(names)
    runs = release.world_runs("quick")
    assert sorted(r["runId"] for r in runs) == sorted(run_ids), "exactly one run per resource"
    assert {s["output"] for s in statuses.values()} == {f"{n}=1" for n in names}


PHASES_SEEN = ("pending", "running", "waiting", "completed", "failed", "cancelled")


def _ended(status: dict[str, object]) -> bool:
    return status.get("phase") in ("completed", "failed", "cancelled")


def test_a_rolling_update_of_the_workers_while_50_runs_are_live(release: Release) -> None:
    names = [f"roll-{i}" for i in range(50)]
    for name in names:
        release.run(name, "steady", 8)
    release.wait_phase(names, ("running", "waiting", "completed"), timeout=120)
    tag = release.cluster.tag_image("e2e-roll")
    live = [n for n, st in release.wait_phase(names, PHASES_SEEN).items() if not _ended(st)]
    say(f"  {len(live)} of {len(names)} runs live when the rollout starts")
    assert live, "the rollout must overlap live runs"
    old = {p.metadata.name for p in release.pods("worker")}
    release.kubectl("set", "image", "deploy/e2e-wayline-worker-default", f"worker=wayline:{tag}")
    rollout = release.kubectl(
        "rollout", "status", "deploy/e2e-wayline-worker-default", "--timeout=300s", timeout=320
    )
    assert "successfully rolled out" in rollout.stdout
    new = release.ready_pods("worker")
    assert {p.metadata.name for p in new}.isdisjoint(old)
    assert all(p.spec.containers[0].image == f"wayline:{tag}" for p in new)
    statuses = release.wait_phase(names, ("completed",), timeout=300)
    assert {s["output"] for s in statuses.values()} == {28}  # 0+1+...+7


def test_a_second_application_on_the_same_nats_never_interferes(release: Release) -> None:
    """Two worker Deployments of different applications on one NATS. While the second
    application has no worker at all, its runs wait (visibly) and the first application's
    workers, with a delivery budget of 2, never receive them: before routing they bounced
    them every 5 s and killed them with MAX_DELIVERIES_EXCEEDED. The first application's runs
    complete meanwhile; the second's complete once their worker is back."""
    release.add_worker("tally", ["/e2e/other_app.py"])  # it registers what it serves
    first = "deploy/e2e-wayline-worker-default"
    release.kubectl("set", "env", first, "WORKFLOW_MAX_QUEUE_DELIVERIES=2")
    release.kubectl("rollout", "status", first, "--timeout=300s", timeout=320)
    release.kubectl("scale", "deploy/e2e-wayline-worker-tally", "--replicas=0")
    release.kubectl("rollout", "status", "deploy/e2e-wayline-worker-tally", "--timeout=120s")
    ours = [f"a-{i}" for i in range(6)]
    theirs = [f"b-{i}" for i in range(6)]
    for name in theirs:
        release.run(name, "tally", name)
    for name in ours:
        release.run(name, "quick", name)
    done = release.wait_phase(ours, ("completed",), timeout=180)
    assert {s["output"] for s in done.values()} == {f"{n}=1" for n in ours}
    time.sleep(15)  # three bounce periods of the old behaviour: long enough to kill them
    waiting = {n: release.status(n).get("phase") for n in theirs}
    assert all(p in ("pending", "running", "waiting") for p in waiting.values()), waiting
    release.kubectl("scale", "deploy/e2e-wayline-worker-tally", "--replicas=1")
    finished = release.wait_phase(theirs, ("completed",), timeout=240)
    assert {s["output"] for s in finished.values()} == {f"{n} counted 3" for n in theirs}
    assert sorted(r["status"] for r in release.world_runs("tally")) == ["completed"] * 6
