"""A burst of runs on real pods scales a WorkflowWorker's version up to its maxReplicas on its
backlog and, once the burst is done and the cooldown has passed, back down to its minReplicas;
every run of the burst completes. The timeline (replicas wanted and ready, backlog, held
messages) is printed and kept (tests/e2e/timelines.py) for docs/operator.md."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.clusters import say
from tests.e2e.conftest import SCALING, Release, current_version
from tests.e2e.timelines import Timeline

pytestmark = pytest.mark.timeout(900)  # a cluster brought up by its first test counts in it

WORKER = "e2e-wayline-worker-default"
BURST = 500
BOUNDS = {"minReplicas": 1, "maxReplicas": 3, "backlogPerReplica": 50, "cooldownSeconds": 10}
"""Three replicas at most on a two-core machine; a backlog of 50 a replica, so the burst asks
for more than the maximum at once; a short cooldown, so the way down fits the test's budget."""
START = f"""
import asyncio, os, time
from wayline import Client, open_world
async def main():
    world = open_world(os.environ["WAYLINE_WORLD"], create=False)
    await world.start()
    try:
        client = Client(world)
        started = time.monotonic()
        for first in range(0, {BURST}, 50):
            await asyncio.gather(*(client.start("e2e.burst", i) for i in range(first, first + 50)))
        print(round(time.monotonic() - started, 1))
    finally:
        await world.close()
asyncio.run(main())
"""
"""Starts the burst from inside a worker pod through the client, 50 starts at a time: one
``kubectl exec``, where a WorkflowRun or a ``wayline start`` per run would cost a request or
a process each."""


def _seen(status: dict[str, Any]) -> str:
    row = current_version(status)
    return (
        f"{row.get('name')} replicas={row.get('replicas') or 0} "
        f"ready={row.get('readyReplicas') or 0} backlog={status.get('backlog') or 0} "
        f"inFlight={status.get('inFlight') or 0}"
    )


def _until(release: Release, timeline: Timeline, check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = release.worker_status(WORKER)
        timeline.see(_seen(status))
        if check(status):
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s: {timeline.lines()}"
        time.sleep(1)


@pytest.mark.parametrize("release", [SCALING], indirect=True)
def test_a_burst_scales_a_version_up_and_back_to_its_minimum(release: Release) -> None:
    timeline = Timeline("workflowworker-burst")
    release.kubectl("patch", "wfw", WORKER, "--type=merge", "-p", json.dumps({"spec": BOUNDS}))

    def settled(status: dict[str, Any]) -> bool:
        row = current_version(status)
        return bool(row.get("identities")) and row.get("replicas") == row.get("readyReplicas") == 1

    _until(release, timeline, settled, 240, "version 1 at its minimum of one ready replica")
    pod = release.wait_ready("worker", 1)[0].metadata.name
    timeline.see(f"starting {BURST} runs")
    took = release.exec(pod, "python", "-c", START).strip()
    timeline.see(f"{BURST} runs started in {took}s")
    most = {"replicas": 0, "ready": 0}

    def back_down(status: dict[str, Any]) -> bool:
        row = current_version(status)
        most["replicas"] = max(most["replicas"], row.get("replicas") or 0)
        most["ready"] = max(most["ready"], row.get("readyReplicas") or 0)
        idle = not status.get("backlog") and not status.get("inFlight")
        up = most["replicas"] == BOUNDS["maxReplicas"]
        return up and idle and row.get("replicas") == row.get("readyReplicas") == 1

    _until(release, timeline, back_down, 300, "the version up and back at its minimum")
    timeline.keep()
    runs = release.world_runs("e2e.burst")
    statuses = {r["status"] for r in runs}
    say(f"  {len(runs)} burst runs, statuses {sorted(statuses)}; at most {most} replicas")
    assert len(runs) == BURST and statuses == {"completed"}
    # The replicas the operator asked for became pods that were ready during the burst (all
    # three, unless the burst was done before the third one started on a loaded machine).
    assert most["ready"] >= 2, f"no second pod was ever ready: {timeline.lines()}"
