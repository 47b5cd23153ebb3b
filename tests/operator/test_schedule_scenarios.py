"""WorkflowSchedule against scenarios from its peers' own suites (Kubernetes CronJob's e2e,
Temporal's schedule tests) and adversarial ones, on a real kube-apiserver + etcd with the
operator process: a WorkflowRun already named as a tick's run (made by the operator before a
crash lost its status write, or by someone else), and the schedule clock jumping a day ahead
(over a thousand missed ticks) and back, with an invalid cron edited into the schedule on the
way. The schedule clock runs 30 times fast (``test_workflowschedule``): a tick every 2 s."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.operator.test_workflowrun import Cluster
from tests.operator.test_workflowschedule import (  # noqa: F401 - fixtures
    RATE,
    _runs,
    _schedule,
    cluster,
    schedule_crds,
)
from tests.runtime.harness import wait_for
from wayline_operator.schedule_resource import WorkflowScheduleSpec
from wayline_operator.schedules import run_manifest

# What a schedule does is the operator's and the API server's; the world only runs the runs
# (test_workflowschedule runs on both): one world keeps these short.
pytestmark = pytest.mark.parametrize("cluster", ["local"], indirect=True)
DAY = 86400.0
ORIGIN = "WAYLINE_SCHEDULE_CLOCK_ORIGIN"


def _schedule_now(on: Cluster) -> float:
    """The operator's schedule clock (``Settings.schedule_now``), read from its environment."""
    origin = float(on.operator.env[ORIGIN])
    return origin + (time.time() - origin) * RATE


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _ticks(on: Cluster) -> list[int]:
    return sorted(int(r["metadata"]["labels"]["wayline.dev/tick"]) for r in _owned(on))


def _owned(on: Cluster) -> list[dict[str, Any]]:
    return [r for r in _runs(on) if "wayline.dev/schedule-uid" in r["metadata"].get("labels", {})]


async def _said(on: Cluster, name: str, reason: str, text: str) -> dict[str, Any]:
    async def posted() -> dict[str, Any] | None:
        found = await asyncio.to_thread(on.events, name)
        hits = (e for e in found if e["reason"] == reason and text in e["message"])
        return next(hits, None)

    event: dict[str, Any] = await wait_for(posted, timeout=40, interval=0.3)
    return event


async def test_a_tick_whose_run_name_is_taken_starts_no_second_run_and_claims_no_other(
    cluster: Cluster,  # noqa: F811
) -> None:
    """A tick must start at most one run: the run an operator made for a tick before it died
    (its status write lost) is that tick's run, not made again. A WorkflowRun someone else
    made under a tick's name is not the schedule's: the tick is not claimed as started by it
    (CronJob: a Job of that name not owned by it), it is said in a Warning Event, and the
    following tick starts as usual."""
    made = cluster.apply("col", _schedule(), "WorkflowSchedule")
    assert made.returncode == 0, made.stderr
    schedule = cluster.get("col", "wfs")
    minute = int(_schedule_now(cluster) // 60) + 3  # two ticks (4 s) to make both runs
    spec = WorkflowScheduleSpec.model_validate(schedule["spec"])
    crashed = run_manifest(schedule, spec, minute * 60.0)
    foreign = {
        "apiVersion": "wayline.dev/v1alpha1",
        "kind": "WorkflowRun",
        "metadata": {"name": f"col-{minute + 1}", "namespace": cluster.namespace},
        "spec": {"workflow": "chain", "input": [7]},
    }
    for body in (crashed, foreign):
        done = cluster.plane.kubectl("create", "-f", "-", input=json.dumps(body))
        assert done.returncode == 0, done.stderr
    assert _schedule_now(cluster) < minute * 60, "too slow to make the runs before the tick"
    await _said(cluster, "col", "Started", f"col-{minute + 2} ")
    taken = await _said(cluster, "col", "NameTaken", f"col-{minute + 1}")
    assert taken["type"] == "Warning"
    started = [e["message"] for e in cluster.events("col") if e["reason"] == "Started"]
    assert not any(f"col-{m} " in s for s in started for m in (minute, minute + 1)), started
    ticks = _ticks(cluster)
    assert minute in ticks and minute + 1 not in ticks and minute + 2 in ticks, ticks
    other = cluster.get(f"col-{minute + 1}")
    assert not other["metadata"].get("ownerReferences") and other["spec"]["input"] == [7]


async def test_a_clock_jump_starts_only_the_latest_missed_tick_and_back_starts_none_again(
    cluster: Cluster,  # noqa: F811
) -> None:
    """CronJob's "more than 100 missed schedules", by the operator's clock jumping a day ahead:
    one run, of the latest tick, no catch-up of the 1,440 before it. Set back (with an
    invalid cron edited in meanwhile, then fixed): nothing is started again, and the status's
    nextScheduleTime is the next tick the schedule will really start, after its last one."""
    made = cluster.apply("jump", _schedule(successfulRunsHistoryLimit=100), "WorkflowSchedule")
    assert made.returncode == 0, made.stderr
    await _said(cluster, "jump", "Started", "started jump-")
    operator, origin = cluster.operator, float(cluster.operator.env[ORIGIN])
    operator.stop()
    before = max(_ticks(cluster))
    operator.env[ORIGIN] = repr(origin - DAY / (RATE - 1))  # its clock a day ahead
    jumped = _schedule_now(cluster)
    operator.start()
    first = int(jumped // 60)  # the tick due when it comes back (or the next one)

    async def caught_up() -> list[int] | None:
        ticks = await asyncio.to_thread(_ticks, cluster)
        return ticks if max(ticks) >= first else None

    await wait_for(caught_up, timeout=40, interval=0.3)
    cluster.kubectl("patch", "wfs", "jump", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    operator.stop()
    ticks = _ticks(cluster)
    assert [t for t in ticks if before < t < first] == [], (before, first, ticks)
    cluster.kubectl("patch", "wfs", "jump", "--type=merge", "-p",
                    '{"spec":{"schedule":"61 * * * *","suspend":false}}')  # fmt: skip
    operator.env[ORIGIN] = repr(origin)  # and back by a day
    operator.start()
    await _said(cluster, "jump", "InvalidSpec", "minute")
    cluster.kubectl(
        "patch", "wfs", "jump", "--type=merge", "-p", '{"spec":{"schedule":"* * * * *"}}'
    )

    async def ready() -> dict[str, Any] | None:
        status = (await asyncio.to_thread(cluster.get, "jump", "wfs"))["status"]
        return status if status["conditions"][0]["status"] == "True" else None

    status = await wait_for(ready, timeout=40, interval=0.3)
    assert _ticks(cluster) == ticks  # nothing due before the last tick's time comes again
    last = _seconds(status["lastScheduleTime"])
    assert last == ticks[-1] * 60
    assert status["nextScheduleTime"] is not None
    assert _seconds(status["nextScheduleTime"]) == last + 60, status
