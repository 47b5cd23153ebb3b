"""A WorkflowWorker's version scaled down on real pods keeps the pod that holds a long step and
removes the idle ones: before the scale-down the operator writes each pod's held deliveries as
its ``controller.kubernetes.io/pod-deletion-cost`` (operator/wayline_operator/pod_costs.py),
and the ReplicaSet controller removes the cheapest of equally ready pods first.

The version goes to three replicas on three held runs, all taken by its first pod: one long
step and two short ones that the test lets end once the three pods are ready. The load then
falls to the one long step, so the operator scales the version back to one replica while the
step runs; the long step ends when the test opens its gate, at least ``LONG`` seconds after it
started and only once the idle pods are gone, so no timing decides the order. Before that, the
test writes the costs an earlier scale-down would have left had the busy pod been idle then
and the others busy (0 on the busy pod, 5 on the idle ones): with no cost written by the
operator, the ReplicaSet would remove the busy pod first, every time, rather than by the chance
of its own order among pods of about the same age. The timeline (replicas, held messages, each
pod's cost and state) is printed and kept (tests/e2e/timelines.py) for docs/operator.md."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.clusters import say
from tests.e2e.conftest import SCALING, Release, current_version
from tests.e2e.timelines import Timeline
from wayline_operator.pod_costs import DELETION_COST

pytestmark = pytest.mark.timeout(900)  # a cluster brought up by its first test counts in it

WORKER = "e2e-wayline-worker-default"
BOUNDS = {"minReplicas": 1, "maxReplicas": 3, "backlogPerReplica": 1, "cooldownSeconds": 5}
"""One replica a held message, so three held runs ask for three replicas and one for one."""
LONG = 60.0
"""The long step's least seconds (it also waits for its gate, opened once the idle pods are
gone): a step far longer than the version's cooldown and its pods' grace period."""
KEY = "podcost-long"
GATED = ("podcost-short-a", "podcost-short-b")
STALE = {"busy": "0", "idle": "5"}
"""The costs the test writes first: an earlier scale-down's, had the pods' work been reversed."""


def _pods(release: Release) -> dict[str, Any]:
    """The worker pods by name, those being deleted too."""
    selector = f"app.kubernetes.io/instance={release.name},app.kubernetes.io/component=worker"
    listed = release.core.list_namespaced_pod(release.namespace, label_selector=selector)
    return {p.metadata.name: p for p in listed.items}


def _ready(pod: Any) -> bool:
    statuses = pod.status.container_statuses or []
    return pod.status.phase == "Running" and bool(statuses) and all(c.ready for c in statuses)


def _seen(status: dict[str, Any], pods: dict[str, Any], busy: str | None) -> str:
    row = current_version(status)
    shown = []
    for name, pod in sorted(pods.items()):
        state = "deleting" if pod.metadata.deletion_timestamp else "ready" if _ready(pod) else "-"
        cost = (pod.metadata.annotations or {}).get(DELETION_COST, "none")
        role = "busy" if name == busy else "idle" if busy else "?"
        shown.append(f"{name[-5:]}({role} cost={cost} {state})")
    return (
        f"replicas={row.get('replicas') or 0} ready={row.get('readyReplicas') or 0} "
        f"backlog={status.get('backlog') or 0} inFlight={status.get('inFlight') or 0}  "
        + " ".join(shown)
    )


@pytest.mark.parametrize("release", [SCALING], indirect=True)
def test_a_scale_down_keeps_the_pod_that_holds_a_step(release: Release) -> None:
    timeline = Timeline("workflowworker-pod-cost")
    try:
        _scale_down_under_a_step(release, timeline)
    finally:
        timeline.keep()


def _scale_down_under_a_step(release: Release, timeline: Timeline) -> None:
    release.kubectl("patch", "wfw", WORKER, "--type=merge", "-p", json.dumps({"spec": BOUNDS}))
    busy: str | None = None

    def until(check: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            status, pods = release.worker_status(WORKER), _pods(release)
            timeline.see(_seen(status, pods, busy))
            if busy is not None and busy in pods:
                deleting = pods[busy].metadata.deletion_timestamp is not None
                assert not deleting, f"the busy pod is being deleted: {timeline.lines()}"
            found = check(status, pods)
            if found:
                return found
            assert time.monotonic() < deadline, f"{what}: not within {timeout}s: {timeline.lines()}"
            time.sleep(1)

    def one_ready(status: dict[str, Any], pods: dict[str, Any]) -> bool:
        row = current_version(status)
        return bool(row.get("identities")) and row.get("replicas") == row.get("readyReplicas") == 1

    until(one_ready, 240, "version 1 at its minimum of one ready replica")
    [first] = [n for n, p in _pods(release).items() if not p.metadata.deletion_timestamp]
    release.run(KEY, "e2e.held", KEY, LONG)
    for key in GATED:
        release.run(key, "e2e.held", key, 0)
    timeline.see(f"started {KEY} (at least {LONG:g} s) and {len(GATED)} short runs")

    def three_ready(status: dict[str, Any], pods: dict[str, Any]) -> bool:
        live = [p for p in pods.values() if not p.metadata.deletion_timestamp]
        return len(live) == 3 and all(_ready(p) for p in live)

    until(three_ready, 180, "three ready pods for three held runs")
    starts = release.marks(KEY)["start"]
    assert len(starts) == 1, f"the long step started {starts}"
    busy = starts[0][0]
    assert busy == first, f"the long step started on {busy}, not on the only pod {first}"
    # A pod still leaving from an earlier scale-down (the version can start above its minimum,
    # and a pod's termination took over 20 s under load in a CI run at eb18ecc) is no part of
    # this scale-down: it gets no stale cost and is not counted among the pods it removes.
    leaving = {n for n, p in _pods(release).items() if p.metadata.deletion_timestamp}
    for name in set(_pods(release)) - leaving:
        cost = STALE["busy"] if name == busy else STALE["idle"]
        release.core.patch_namespaced_pod(
            name, release.namespace, {"metadata": {"annotations": {DELETION_COST: cost}}}
        )
    timeline.see(f"stale costs written: busy {STALE['busy']}, idle {STALE['idle']}")
    for key in GATED:
        release.exec(busy, "touch", f"/marks/gate-{key}")
    timeline.see("short runs' gates opened")
    went: dict[str, str] = {}
    """The idle pods being deleted, with the cost each had when its deletion was first seen."""

    def idle_gone(status: dict[str, Any], pods: dict[str, Any]) -> bool:
        for name, pod in pods.items():
            if pod.metadata.deletion_timestamp and name not in went and name not in leaving:
                went[name] = (pod.metadata.annotations or {}).get(DELETION_COST, "none")
        return set(pods) == {busy} and current_version(status).get("replicas") == 1

    until(idle_gone, 120, "the idle pods removed, the busy one kept")
    idle_gone_at = time.time()  # wall clock, as the marks' times (one machine, one clock)
    cost = (_pods(release)[busy].metadata.annotations or {}).get(DELETION_COST)
    # What the registry said the pod held as the operator looked: one delivery or more (the
    # short steps' ends reach it with the workers' next heartbeat), never the stale 0.
    assert cost is not None and int(cost) >= 1, f"the busy pod's cost is {cost}"
    assert set(went.values()) == {"0"}, f"the idle pods' costs as they went: {went}"
    release.exec(busy, "touch", f"/marks/gate-{KEY}")
    timeline.see("idle pods gone; the long step's gate opened")

    def long_done(status: dict[str, Any], pods: dict[str, Any]) -> bool:
        return bool(release.marks(KEY)["end"]) and not status.get("inFlight")

    until(long_done, LONG + 60, "the long step's end")
    marks = release.marks(KEY)
    [(start_pod, started)] = marks["start"]
    [(end_pod, ended)] = marks["end"]
    say(f"  long step on {busy}: {ended - started:.1f}s; idle pods gone {sorted(went)}")
    assert start_pod == end_pod == busy
    assert ended - started >= LONG - 0.5, "the step's body was cut short"
    # The idle pods went while the long step still ran: the scale-down did not wait for it.
    assert len(went) == 2 and busy not in went
    assert idle_gone_at < ended
    every = release.marks_matching("podcost-*")
    once = {k: (len(m["start"]), len(m["end"])) for k, m in every.items()}
    assert once == {k: (1, 1) for k in (KEY, *GATED)}, f"bodies started and ended: {once}"
    done = release.wait_phase([KEY, *GATED], ("completed",), timeout=60)
    assert all(s.get("phase") == "completed" for s in done.values())
    runs = {r["status"] for r in release.world_runs("e2e.held")}
    assert runs == {"completed"}
