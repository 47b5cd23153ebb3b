"""The leader of the world's event log stream SIGKILLed under live runs, on real pods: a
three-node NATS StatefulSet (``nats.replicas=3``, so the world's streams have three replicas)
and two worker pods. A step body that ends while the stream elects its next leader must not
run again: the worker retries its completion through the election while it provably still
holds the delivery (tests/nats/test_leader_crash.py shows the same on a cluster of processes).
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.clusters import say
from tests.e2e.conftest import Install, Release

pytestmark = pytest.mark.timeout(600)

RUNS = 60
STEPS = 8
STEP_SECONDS = 1.0

Marks = dict[str, dict[str, list[tuple[str, float]]]]


def _reruns(marks: Marks) -> dict[str, str]:
    """The steps whose body started again after an earlier body of the same step had ended:
    {step key: how long after that end}."""
    out = {}
    for key, seen in marks.items():
        ends = [at for _, at in seen["end"]]
        again = [at - min(ends) for _, at in seen["start"] if ends and at > min(ends)]
        if again:
            out[key] = f"{max(again):.1f}s"
    return out


def _step_marks(marks: Marks, run: str) -> list[dict[str, list[tuple[str, float]]]]:
    return [marks.get(f"{run}-{i}", {"start": [], "end": []}) for i in range(STEPS)]


def _exit_code(release: Release, pod: str) -> int:
    """How the pod's first container last ended, once the kubelet has restarted it."""
    deadline = time.monotonic() + 60
    while True:
        (status,) = release.core.read_namespaced_pod(
            pod, release.namespace
        ).status.container_statuses
        if status.last_state.terminated is not None:
            code: int = status.last_state.terminated.exit_code
            return code
        assert time.monotonic() < deadline, f"{pod} was not restarted: {status}"
        time.sleep(1)


#: Three NATS nodes, and workers with the chart's default settings: a 30 s visibility window,
#: which a worker's hold outlasts a leader election by. Under the suite's 4 s window, an
#: election of about 5 s on this cluster outlasted the hold, and the step ran again.
THREE_NODES = Install(values={"nats": {"replicas": 3}}, worker_env={})


@pytest.mark.parametrize("release", [THREE_NODES], indirect=True)
def test_the_event_log_leader_killed_under_60_runs_reruns_no_finished_step(
    release: Release,
) -> None:
    """The leader's nats-server gets SIGKILL from its node's containerd: the NATS image has no
    shell to ``kubectl exec`` a kill in, and deleting the pod, even with a grace period of 0,
    sends SIGTERM first, after which nats-server hands its leaderships over cleanly. The
    kubelet restarts the killed container in the same pod, on the same volume."""
    assert len(release.wait_ready("nats", 3)) == 3
    runs = [f"lc-{i}" for i in range(RUNS)]
    for run in runs:
        release.run(run, "stepped", run, STEPS, STEP_SECONDS)
    deadline = time.monotonic() + 120
    while True:  # every run in its steps, most of them with several still to go
        started = {key.rsplit("-", 1)[0] for key in release.marks_matching("lc-*.start.*")}
        if len(started) == RUNS:
            break
        assert time.monotonic() < deadline, f"{len(started)} of {RUNS} runs started a step"
        time.sleep(0.5)
    leader = release.stream_leader()
    (pod,) = [p for p in release.pods("nats") if p.metadata.name == leader]
    (nats,) = pod.status.container_statuses
    release.cluster.kill_container(pod.spec.node_name, nats.container_id)
    killed_at = time.time()

    statuses = release.wait_phase(runs, ("completed",), timeout=240)
    ended_at = time.time()
    assert {s["output"] for s in statuses.values()} == {STEPS}
    marks = release.marks_matching("lc-*")
    by_run = {r: _step_marks(marks, r) for r in runs}
    live = [r for r in runs if not any(at < killed_at for _, at in by_run[r][-1]["end"])]
    say(f"  leader {leader} killed with {len(live)} of {RUNS} runs live")
    assert live, "the kill must overlap live runs"
    # A run has moved again once it starts a step body after the kill: its previous step's
    # completion went through the election (a run in its last step shows it only by completing).
    moved = [
        min(starts)
        for r in live
        if (starts := [at for m in by_run[r] for _, at in m["start"] if at > killed_at])
    ]
    # How long a body that ended after the kill waited for its run's next body: its completion
    # was written through the election.
    waits = [
        min(at for _, at in later["start"]) - max(at for _, at in earlier["end"])
        for r in live
        for earlier, later in zip(by_run[r], by_run[r][1:], strict=False)
        if earlier["end"] and later["start"] and min(at for _, at in earlier["end"]) > killed_at
    ]
    if moved and waits:
        say(
            f"  {len(moved)} live runs started a step again, the last "
            f"{max(moved) - killed_at:.1f}s after the kill; a body that ended after the kill "
            f"waited at most {max(waits):.1f}s for its run's next one; all runs completed "
            f"{ended_at - killed_at:.1f}s after the kill"
        )
    say(f"  {len(_reruns(marks))} step bodies started again after one had ended")
    assert _exit_code(release, leader) == 137  # 128 + SIGKILL: a crash, not a shutdown
    assert not _reruns(marks), f"bodies started again after one had ended: {_reruns(marks)}"
    bodies = {key: len(seen["start"]) for key, seen in marks.items()}
    assert len(bodies) == RUNS * STEPS, sorted(bodies)
