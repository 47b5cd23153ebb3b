"""A WorkflowWorker rollout on real pods: runs pinned to version 1 finish on version 1's pods
while version 2 takes every new run (version 1's pods drain: they take none), no run ever
waits for a worker, and version 1's Deployment
is deleted once its last run has ended. The timeline (versions, replicas, pinned runs, backlog)
is printed and kept (tests/e2e/timelines.py) for docs/operator.md."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clusters import say
from tests.e2e.conftest import Install, Release
from tests.e2e.timelines import Timeline, versions
from wayline_operator.deployments import DRAINING_ENV

pytestmark = pytest.mark.timeout(900)  # a cluster brought up by its first test counts in it

FLOWS_V2 = Path(__file__).with_name("flows_v2.py")
WORKER = "e2e-wayline-worker-default"
RUNS = 50
"""Live runs pinned to version 1 when version 2 is rolled out."""
ROUNDS = 20
"""``steady`` rounds: about 40 s a run, long enough to outlive version 2's start."""


def _worker(release: Release) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(release.kubectl("get", "wfw", WORKER, "-o", "json").stdout)
    return found


def _rows(release: Release) -> dict[str, dict[str, Any]]:
    status = _worker(release).get("status") or {}
    return {r["name"]: r for r in status.get("versions") or []}


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout}s")


def _drained(release: Release, version: str) -> bool:
    """Whether every pod of ``version``'s Deployment runs its drained template (or it is gone):
    none of its pods takes a new run any more."""
    done = release.kubectl("get", "deployment", f"{WORKER}-{version}", "-o", "json")
    if done.returncode != 0:
        return True
    found = json.loads(done.stdout)
    [worker] = [c for c in found["spec"]["template"]["spec"]["containers"] if c["name"] == "worker"]
    status = found.get("status") or {}
    return (
        {"name": DRAINING_ENV, "value": "1"} in (worker.get("env") or [])
        and status.get("observedGeneration", 0) >= found["metadata"]["generation"]
        and status.get("updatedReplicas", 0) == status.get("replicas", 0)
    )


def _waiting_for_worker(release: Release, names: list[str]) -> list[str]:
    listed = release.custom.list_namespaced_custom_object(
        "wayline.dev", "v1alpha1", release.namespace, "workflowruns"
    )
    return [
        item["metadata"]["name"]
        for item in listed["items"]
        if item["metadata"]["name"] in names
        and any(
            w.get("kind") == "worker" for w in (item.get("status") or {}).get("waitingFor") or []
        )
    ]


@pytest.mark.parametrize(
    "release", [Install(values={"workerResource": "WorkflowWorker"})], indirect=True
)
def test_a_rollout_keeps_version_1_until_its_pinned_runs_end(release: Release) -> None:
    def serving() -> dict[str, Any] | None:
        rows = list(_rows(release).values())
        return (
            rows[0]
            if len(rows) == 1 and rows[0]["identities"] and rows[0]["readyReplicas"]
            else None
        )

    v1 = _until(serving, 240, "version 1 ready")["name"]
    data = {"data": {"flows_v2.py": FLOWS_V2.read_text()}}
    release.kubectl("patch", "configmap", "e2e-flows", "--type=merge", "-p", json.dumps(data))
    old = [f"pinned-{i}" for i in range(RUNS)]
    for name in old:
        release.run(name, "steady", ROUNDS)
    release.wait_phase(old, ("running", "waiting"), timeout=120)
    apps = {"spec": {"apps": ["examples.orders", "/e2e/flows_v2.py"]}}
    timeline = Timeline("workflowworker-rollout")
    release.kubectl("patch", "wfw", WORKER, "--type=merge", "-p", json.dumps(apps))
    waited: set[str] = set()
    new: list[str] = []
    v2 = None
    most_pinned = 0
    while True:
        status = _worker(release).get("status") or {}
        rows = {r["name"]: r for r in status.get("versions") or []}
        timeline.see(versions(rows, status.get("backlog")))
        most_pinned = max(most_pinned, (rows.get(v1) or {}).get("pinnedRuns") or 0)
        waited |= set(_waiting_for_worker(release, old + new))
        current = next((n for n, r in rows.items() if r["state"] == "Current"), None)
        ready = (rows.get(current or "") or {}).get("readyReplicas")
        # New runs are started once version 2 is up and version 1's pods have rolled with the
        # drain (before, an old pod not rolled yet could still take one: docs/operator.md).
        if v2 is None and current != v1 and ready and _drained(release, v1):
            v2 = current
            new = [f"fresh-{i}" for i in range(3)]
            for name in new:
                release.run(name, "steady", 2)
            timeline.see(f"{len(new)} runs started")
        if v2 is not None and v1 not in rows:
            break
        assert time.monotonic() - timeline.started < 360, f"no end: {timeline.lines()}"
        time.sleep(1)
    timeline.keep()
    assert not waited, f"runs waited for a worker: {sorted(waited)}"
    finished = release.wait_phase(old, ("completed",), timeout=60)
    assert {s["output"] for s in finished.values()} == {sum(range(ROUNDS))}  # version 1's code
    fresh = release.wait_phase(new, ("completed",), timeout=120)
    # Version 1's pods drain, so every run started after the rollout ran version 2's code.
    on_v2 = sum(s["output"] == 1 + 1000 for s in fresh.values())
    say(f"  {on_v2} of {len(new)} runs started after the rollout ran version 2's code")
    assert {s["output"] for s in fresh.values()} == {1 + 1000}
    # Version 1 was seen keeping every run pinned to it, not let go before they ended.
    assert most_pinned == RUNS, f"version 1 kept at most {most_pinned} pinned runs"
    deployments = release.kubectl("get", "deployments", "-o", "name").stdout.split()
    assert f"deployment.apps/{WORKER}-{v1}" not in deployments
    assert f"deployment.apps/{WORKER}-{v2}" in deployments
