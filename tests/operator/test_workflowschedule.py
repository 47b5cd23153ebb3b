"""WorkflowSchedule end to end on a real kube-apiserver + etcd: the operator process (two of
them, or one killed and restarted) ticks a schedule, and its WorkflowRuns run on a worker on
either world. The schedule clock runs fast (``WAYLINE_SCHEDULE_CLOCK_RATE``, shared by every
operator process through ``..._ORIGIN``): 30 times for the modules that use this module's
``cluster`` fixture (a minute's tick every 2 s), 60 times for this module's own tests
(``CLOCK_RATE``: a tick every second), whose claims are counted in ticks, not seconds."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.operator.operated import operated
from tests.operator.test_workflowrun import APPS, Cluster, Operator
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.events import RunStatus

RATE = 30.0
"""The schedule clock's rate for a module that sets no ``CLOCK_RATE`` of its own."""
CLOCK_RATE = 60.0
"""This module's rate: its tests wait for ticks (six of them, five, four suspended), so a tick
every second instead of every 2 s halves those waits. The operator looks at each schedule
every 0.3 s, three looks a tick."""
SLOW_CLOCK_RATE = 15.0
"""The rate for a test that counts every tick: a schedule skips a tick no operator looked at in
time (only the latest missed tick runs, as a CronJob's), and at 60 times a tick came every
second, so two operators both held up for a second on a loaded machine (a CI run at a load
average of 40) left gaps that were no fault of the coordination under test. At 15 times a tick
comes every 4 s, thirteen looks a tick."""
SCHEDULE_APPS = [*APPS, flows.sleeper]


@pytest.fixture(scope="module")
def schedule_crds(crds_established: None) -> None:
    """The CRDs, applied once a session (tests/operator/conftest.py)."""


@pytest.fixture(params=["local", "nats"])
async def cluster(
    request: pytest.FixtureRequest,
    control_plane: Any,
    schedule_crds: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Cluster]:
    marker = request.node.get_closest_marker("schedule_clock_rate")
    rate = marker.args[0] if marker else getattr(request.module, "CLOCK_RATE", RATE)
    env = {
        "WAYLINE_OPERATOR_SCHEDULE_SECONDS": "0.3",
        "WAYLINE_SCHEDULE_CLOCK_RATE": str(rate),
        "WAYLINE_SCHEDULE_CLOCK_ORIGIN": str(time.time()),
    }
    async with operated(request, control_plane, tmp_path, monkeypatch, "s", env) as made:
        yield made


def _runs(cluster: Cluster) -> list[dict[str, Any]]:
    """The namespace's WorkflowRuns by name, as ``kubectl get wfr -o json`` lists them, read in
    this process: the tests poll it a few times a second, and a kubectl process each time cost
    a core's share on a loaded machine."""
    path = f"/apis/wayline.dev/v1alpha1/namespaces/{cluster.namespace}/workflowruns"
    code, body = cluster.plane.read(path)
    assert code == 200, f"GET {path}: HTTP {code}: {body.get('message')}"
    items: list[dict[str, Any]] = body["items"]
    return sorted(items, key=lambda r: r["metadata"]["name"])


async def _count(cluster: Cluster, n: int, timeout: float = 30) -> list[dict[str, Any]]:
    async def enough() -> list[dict[str, Any]] | None:
        runs = await asyncio.to_thread(_runs, cluster)
        return runs if len(runs) >= n else None

    found: list[dict[str, Any]] = await wait_for(enough, timeout=timeout, interval=0.3)
    return found


def _schedule(**spec: Any) -> dict[str, Any]:
    return {"schedule": "* * * * *", "workflow": "chain", "input": [1], **spec}


@pytest.mark.schedule_clock_rate(SLOW_CLOCK_RATE)
async def test_every_tick_starts_one_run_across_two_operators_and_a_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    second = Operator(cluster.namespace, cluster.operator.env, tmp_path / "operator2.log")
    second.start()
    try:
        async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
            made = cluster.apply(
                "every", _schedule(successfulRunsHistoryLimit=50), "WorkflowSchedule"
            )
            assert made.returncode == 0, made.stderr
            await _count(cluster, 2, timeout=60)
            cluster.operator.stop(signal.SIGKILL)  # one dies mid-schedule and comes back
            cluster.operator.start()
            await _count(cluster, 6, timeout=90)
            cluster.kubectl(
                "patch", "wfs", "every", "--type=merge", "-p", '{"spec":{"suspend":true}}'
            )
            await asyncio.sleep(1.0)  # a look in flight may still start one tick
            runs = await asyncio.to_thread(_runs, cluster)
            for r in runs:
                await cluster.status_when(r["metadata"]["name"], "completed")
    finally:
        second.stop()
    schedule = cluster.get("every", "wfs")
    ticks = [int(r["metadata"]["labels"]["wayline.dev/tick"]) for r in runs]
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))  # no tick missed, none twice
    assert [r["metadata"]["name"] for r in runs] == [f"every-{t}" for t in ticks]
    for r in runs:
        [owner] = r["metadata"]["ownerReferences"]
        assert owner["uid"] == schedule["metadata"]["uid"] and owner["kind"] == "WorkflowSchedule"
    # each tick's run started once in the world; its creation announced at most once (the
    # operator SIGKILLed between creating a run and posting its Event loses that one Event)
    assert len(await cluster.client.list_runs(limit=1000)) == len(runs)
    started = [e for e in cluster.events("every") if e["reason"] == "Started"]
    assert len(runs) - 1 <= sum(e.get("count", 1) for e in started) <= len(runs)
    assert schedule["status"]["lastRun"] == runs[-1]["metadata"]["name"]


async def test_forbid_skips_ticks_while_a_run_is_live(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
        seconds = 2.5 * 60 / CLOCK_RATE  # 2.5 ticks
        spec = _schedule(workflow="sleeper", input=[seconds], concurrencyPolicy="Forbid")
        assert cluster.apply("forbid", spec, "WorkflowSchedule").returncode == 0
        runs = await _count(cluster, 2, timeout=40)
        await cluster.event_when("forbid", "Skipped")
    infos = [await cluster.world.get_run(r["status"]["runId"]) for r in runs[:2] if r.get("status")]
    first, nxt = infos[0], infos[1] if len(infos) > 1 else None
    assert first is not None and first.ended_at is not None
    if nxt is not None:  # never two at once: the next run was created after the first ended
        assert nxt.created_at >= first.ended_at
    ticks = [int(r["metadata"]["labels"]["wayline.dev/tick"]) for r in runs]
    assert ticks[1] - ticks[0] >= 2  # 2.5 ticks of run: at least one was skipped


async def test_replace_cancels_the_live_run_and_starts_the_next(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
        spec = _schedule(workflow="sleeper", input=[600.0], concurrencyPolicy="Replace")
        assert cluster.apply("replace", spec, "WorkflowSchedule").returncode == 0
        runs = await _count(cluster, 2)
        first = await cluster.status_when(runs[0]["metadata"]["name"], "cancelled")
        cluster.kubectl(
            "patch", "wfs", "replace", "--type=merge", "-p", '{"spec":{"suspend":true}}'
        )
        await cluster.event_when("replace", "Replaced")
    info = await cluster.world.get_run(first["runId"])
    assert info is not None and info.status is RunStatus.CANCELLED
    await asyncio.sleep(1.0)  # a look in flight may still replace once more
    newest = (await asyncio.to_thread(_runs, cluster))[-1]
    assert newest["spec"].get("cancel") is not True  # only an earlier tick's run is replaced


async def test_history_limits_delete_old_runs_and_suspend_stops_ticks(cluster: Cluster) -> None:
    async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
        spec = _schedule(successfulRunsHistoryLimit=2)
        assert cluster.apply("hist", spec, "WorkflowSchedule").returncode == 0
        await cluster.event_when("hist", "Started")
        await wait_for(lambda: _started(cluster, "hist", 5), timeout=30, interval=0.3)
        cluster.kubectl("patch", "wfs", "hist", "--type=merge", "-p", '{"spec":{"suspend":true}}')

        async def settled() -> list[dict[str, Any]] | None:
            runs = await asyncio.to_thread(_runs, cluster)
            phases = [(r.get("status") or {}).get("phase") for r in runs]
            return runs if len(runs) == 2 and phases == ["completed", "completed"] else None

        kept = await wait_for(settled, timeout=20, interval=0.3)
        before = await _started(cluster, "hist", 0)
        await asyncio.sleep(4 * 60 / CLOCK_RATE)  # four ticks' worth, suspended
        assert await _started(cluster, "hist", 0) == before
    status = cluster.get("hist", "wfs")["status"]
    assert "nextScheduleTime" not in status or status["nextScheduleTime"] is None
    assert before >= 5 and [r["metadata"]["name"] for r in kept] == sorted(
        r["metadata"]["name"] for r in kept
    )
    assert len(await cluster.client.list_runs(limit=100)) == before  # the world keeps history


async def _started(cluster: Cluster, name: str, n: int) -> int:
    events = await asyncio.to_thread(cluster.events, name)
    total = sum(e.get("count", 1) for e in events if e["reason"] == "Started")
    return total if total >= n else 0


async def _status_of(cluster: Cluster, name: str, timeout: float = 30) -> Any:
    """The schedule's status once the operator has written one: its Event is posted before
    the status patch, so a read right after the Event may find no status yet."""
    deadline = asyncio.get_running_loop().time() + timeout
    while "status" not in (found := cluster.get(name, "wfs")):
        assert asyncio.get_running_loop().time() < deadline, f"{name} has no status"
        await asyncio.sleep(0.2)
    return found["status"]


async def test_an_invalid_schedule_is_an_event_and_a_condition(cluster: Cluster) -> None:
    bad = cluster.apply("bad", _schedule(schedule="61 * * * *"), "WorkflowSchedule")
    assert bad.returncode == 0, bad.stderr
    event = await cluster.event_when("bad", "InvalidSpec")
    assert "minute" in event["message"] and event["type"] == "Warning"
    zone = cluster.apply("zone", _schedule(timeZone="Mars/Olympus"), "WorkflowSchedule")
    assert zone.returncode == 0, zone.stderr
    event = await cluster.event_when("zone", "InvalidSpec")
    assert "Mars/Olympus" in event["message"]
    ready = (await _status_of(cluster, "zone"))["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
    policy = cluster.apply("policy", _schedule(concurrencyPolicy="Sometimes"), "WorkflowSchedule")
    assert policy.returncode != 0 and "concurrencyPolicy" in policy.stderr
    # fixed, it schedules
    assert (
        cluster.apply("bad", _schedule(schedule="*/1 * * * *"), "WorkflowSchedule").returncode == 0
    )
    await cluster.event_when("bad", "Started")
    assert cluster.operator.proc is not None and cluster.operator.proc.poll() is None
    printed = cluster.kubectl("get", "wfs").stdout
    assert "SCHEDULE" in printed and "NEXT" in printed and "*/1 * * * *" in printed


async def test_a_schedule_fixed_while_suspended_no_longer_shows_its_error(
    cluster: Cluster,
) -> None:
    """A time zone fixed together with ``suspend: true`` (or fixed between two ticks) left the
    error as the status's message, and as the message of ``Ready=True``, until the next run
    started: for a daily schedule a day of a ready schedule saying its time zone is unknown."""
    assert (
        cluster.apply("z", _schedule(timeZone="Mars/Olympus"), "WorkflowSchedule").returncode == 0
    )
    await cluster.event_when("z", "InvalidSpec")
    fixed = '{"spec":{"timeZone":"UTC","suspend":true}}'
    cluster.kubectl("patch", "wfs", "z", "--type=merge", "-p", fixed)

    async def suspended() -> dict[str, Any] | None:
        status = (await asyncio.to_thread(cluster.get, "z", "wfs")).get("status") or {}
        [ready] = status.get("conditions") or [{}]
        return status if ready.get("reason") == "Suspended" else None

    status = await wait_for(suspended, timeout=15, interval=0.3)
    [ready] = status["conditions"]
    assert ready["status"] == "True"
    assert "Mars" not in ready["message"] and "Mars" not in (status.get("message") or "")
    assert not _runs(cluster)


async def test_a_schedules_status_observes_its_edited_spec(cluster: Cluster) -> None:
    """``status.observedGeneration`` and the ``Ready`` condition's follow the spec (KEP-1623,
    as a WorkflowRun's): a schedule had neither, so after an edit nothing told a status
    written for the new spec from one left from the old (kstatus read it as current)."""
    async with wayline.Worker(cluster.world, SCHEDULE_APPS, settings=settings()):
        assert cluster.apply("g", _schedule(), "WorkflowSchedule").returncode == 0
        await cluster.event_when("g", "Started")
        edit = '{"spec":{"input":[2]}}'
        cluster.kubectl("patch", "wfs", "g", "--type=merge", "-p", edit)

        async def observed() -> dict[str, Any] | None:
            body = await asyncio.to_thread(cluster.get, "g", "wfs")
            status = body.get("status") or {}
            seen = status.get("observedGeneration") == body["metadata"]["generation"]
            return status if seen else None

        status = await wait_for(observed, timeout=15, interval=0.3)
    [ready] = status["conditions"]
    assert ready["observedGeneration"] == status["observedGeneration"] == 2
    assert ready["status"] == "True"
