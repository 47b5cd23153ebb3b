"""Running the operator as a platform team does: its Prometheus metrics and JSON logs, and two
replicas with kopf peering where the active one is SIGKILLed mid-flight (real API server)."""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401 - crd_applied is a fixture
    APPS,
    Cluster,
    Operator,
    _kubeconfig_env,
    crd_applied,
)
from tests.runtime.harness import settings, wait_for
from tests.servers import free_port
from wayline._core.events import EventType
from wayline.world.business_ids import generation_run_id
from wayline.worlds.local import LocalWorld
from wayline_operator.peering import peering_object

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("crd_applied")]


class Replica(Operator):
    """``python -m wayline_operator --namespace NS`` with extra options."""

    def __init__(self, namespace: str, env: dict[str, str], log: Path, *args: str) -> None:
        super().__init__(namespace, env, log)
        self.args = args

    def command(self) -> list[str]:
        return [*super().command(), *self.args]

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def said(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        async def found() -> re.Match[str] | None:
            return re.search(pattern, self.text())

        match: re.Match[str] = await wait_for(found, timeout=timeout, interval=0.1)
        return match


@pytest.fixture
async def cluster_of(control_plane: Any, tmp_path: Path) -> AsyncIterator[Callable[..., Cluster]]:
    """``cluster_of(*replica_args)``: a namespace, a SQLite world and one operator process per
    argument tuple (the first is ``cluster.operator``; all are in ``cluster.replicas``)."""
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    done = control_plane.kubectl("create", "namespace", namespace)
    assert done.returncode == 0, done.stderr
    url = f"sqlite:///{tmp_path / 'wayline.db'}"
    world = LocalWorld(tmp_path / "wayline.db", poll_interval=0.01)
    await world.start()
    env = _kubeconfig_env(url, control_plane.kubeconfig)
    replicas: list[Replica] = []

    def make(*arg_sets: tuple[str, ...]) -> Cluster:
        for args in arg_sets:  # called again, it adds replicas (a Deployment's replacements)
            replica = Replica(namespace, env, tmp_path / f"operator{len(replicas)}.log", *args)
            replicas.append(replica)
        cluster = Cluster(control_plane, namespace, world, wayline.Client(world), replicas[0])
        cluster.replicas = replicas  # type: ignore[attr-defined]
        return cluster

    yield make
    for replica in replicas:
        replica.stop()
    await world.close()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_operator_metrics_are_scraped_and_its_logs_are_json_lines(
    cluster_of: Callable[..., Cluster],
) -> None:
    cluster = cluster_of(
        ("--metrics-port", "0", "--metrics-host", "127.0.0.1", "--log-format", "json")
    )
    replica: Replica = cluster.operator  # type: ignore[assignment]
    replica.start()
    port = int((await replica.said(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")).group(1))
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        assert cluster.apply("sum", {"workflow": "chain", "input": [3]}).returncode == 0
        await cluster.status_when("sum", "completed")
        await cluster.event_when("sum", "RunSucceeded")
    got = scrape(port)

    def v(name: str, **labels: str) -> float:
        return got.get((name, tuple(sorted(labels.items()))), 0.0)

    assert v("wayline_operator_reconciles_total", handler="start", result="ok") == 1
    assert v("wayline_operator_reconciles_total", handler="mirror", result="ok") >= 1
    assert v("wayline_operator_status_patches_total", handler="mirror") >= 1
    # RunStarted alone, or folded into RunSucceeded when the run ended before its first status
    assert v("wayline_operator_events_total", reason="RunStarted") <= 1
    assert v("wayline_operator_events_total", reason="RunSucceeded") == 1
    posted = [e["reason"] for e in cluster.events("sum")]
    assert posted.count("RunSucceeded") == 1  # the counter matches what the API server holds
    replica.stop()
    lines = [line for line in replica.text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["logger"].startswith("kopf") for r in records)
    about = [r for r in records if (r.get("object") or {}).get("name") == "sum"]
    assert about and all(r["object"]["namespace"] == cluster.namespace for r in about)


LIFETIME = 8
"""The peering lifetime in the HA test: how long a silent replica is presumed alive."""


async def test_two_replicas_one_killed_mid_flight_start_each_run_once_and_none_stalls(
    cluster_of: Callable[..., Cluster],
) -> None:
    peering = ("--peering", "wayline-ha", "--peering-lifetime", str(LIFETIME))
    cluster = cluster_of((*peering, "--priority", "200"), (*peering, "--priority", "100"))
    active, standby = cluster.replicas  # type: ignore[attr-defined]
    path = Path(cluster.plane.kubeconfig).parent / f"{cluster.namespace}-peering.json"
    path.write_text(json.dumps(peering_object("wayline-ha", cluster.namespace)))
    cluster.kubectl("apply", "-f", str(path))
    active.start()
    await active.said(r"Resuming operations")  # kopf starts paused until it knows its peers
    standby.start()

    async def peers() -> bool:
        got = await asyncio.to_thread(cluster.get, "wayline-ha", "kopfpeering")
        return len(got.get("status") or {}) == 2

    await wait_for(peers, timeout=30, interval=0.2)
    await asyncio.sleep(1.0)
    assert "Resuming operations" not in standby.text()  # the standby stands by
    created: dict[str, float] = {}
    seen: dict[str, float] = {}
    total, kill_after = 14, 5

    async def watch() -> None:
        while len(seen) < total:
            listed = await asyncio.to_thread(cluster.kubectl, "get", "wfr", "-o", "json")
            now = time.monotonic()
            for item in json.loads(listed.stdout)["items"]:
                name = item["metadata"]["name"]
                if name in created and name not in seen and (item.get("status") or {}).get("runId"):
                    seen[name] = now
            await asyncio.sleep(0.2)

    killed_at = 0.0
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        watcher = asyncio.create_task(watch())
        for i in range(total):
            name = f"ha-{i}"
            done = await asyncio.to_thread(cluster.apply, name, {"workflow": "chain", "input": [3]})
            assert done.returncode == 0, done.stderr
            created[name] = time.monotonic()
            if i == kill_after - 1:
                await wait_for(lambda: _has(seen, f"ha-{kill_after - 2}"), timeout=30)
                active.stop(signal.SIGKILL)  # the active replica dies mid-flight
                killed_at = time.monotonic()
            await asyncio.sleep(0.4)
        await asyncio.wait_for(watcher, timeout=LIFETIME * 4)
        for name in created:
            await cluster.status_when(name, "completed", timeout=60)
    await standby.said(r"Resuming operations")  # it took over
    waits = {name: seen[name] - created[name] for name in created}
    print(
        f"\nstatus waits after creation (s): max {max(waits.values()):.1f}, "
        f"before the kill max {max(waits[f'ha-{i}'] for i in range(kill_after - 1)):.1f}; "
        f"takeover {max(seen.values()) - killed_at:.1f}s after the SIGKILL"
    )
    # Nothing stalls longer than the peering lifetime (plus the standby's relist and first
    # handler, which the lifetime does not cover) ...
    slack = 5.0
    assert all(w <= LIFETIME + slack for w in waits.values()), waits
    # ... and exactly one run per resource, each started once.
    runs = await cluster.client.list_runs(limit=1000)
    named = [generation_run_id(name, cluster.namespace, 0) for name in created]
    assert sorted(r.run_id for r in runs) == sorted(named)
    for run in runs:
        events = await cluster.world.list_events(run.run_id)
        kinds = [e.type for e in events]
        assert kinds.count(EventType.RUN_CREATED) == 1 and kinds.count(EventType.RUN_STARTED) == 1
        assert kinds.count(EventType.STEP_STARTED) == 3  # three steps, each body started once
    for name in created:
        posted = [e["reason"] for e in cluster.events(name)]
        assert posted.count("RunStarted") <= 1, (name, posted)


async def _has(seen: dict[str, float], name: str) -> bool:
    return name in seen


def _patches(port: int) -> float:
    return scrape(port).get(
        ("wayline_operator_status_patches_total", (("handler", "mirror"),)), 0.0
    )


async def test_a_paused_replica_writes_no_status_and_takes_over_when_the_active_one_dies(
    cluster_of: Callable[..., Cluster],
) -> None:
    """Only the replica kopf peering lets work writes statuses: the first one pumps them
    until a replica of higher priority arrives, then none at all (though its runs move)
    until that one is SIGKILLed, then it does again."""
    peering = ("--peering", "wayline-pause", "--peering-lifetime", str(LIFETIME))
    metrics = ("--metrics-port", "0", "--metrics-host", "127.0.0.1")
    cluster = cluster_of(
        (*peering, "--priority", "100", *metrics), (*peering, "--priority", "200", *metrics)
    )
    low, high = cluster.replicas  # type: ignore[attr-defined]
    path = Path(cluster.plane.kubeconfig).parent / f"{cluster.namespace}-pause.json"
    path.write_text(json.dumps(peering_object("wayline-pause", cluster.namespace)))
    cluster.kubectl("apply", "-f", str(path))
    low.start()
    port = int((await low.said(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")).group(1))
    await low.said(r"Resuming operations")
    names = [f"p-{i}" for i in range(3)]
    for name in names:  # no worker yet: the runs wait, and the low replica knows them
        assert cluster.apply(name, {"workflow": "chain", "input": [2]}).returncode == 0
    for name in names:
        await wait_for(lambda n=name: _has_run(cluster, n), timeout=30)
    high.start()
    high_port = int((await high.said(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")).group(1))
    await low.said(r"Pausing operations in favour of")
    await high.said(r"Resuming operations")
    before = _patches(port)
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        for name in names:  # the runs move: the active replica writes their statuses ...
            await cluster.status_when(name, "completed", timeout=60)
        await asyncio.sleep(2.0)
        # ... and the paused one none, though it knew them and heard them move
        assert _patches(port) == before
        assert _patches(high_port) >= len(names)
        high.stop(signal.SIGKILL)
        await wait_for(lambda: _resumed_twice(low), timeout=LIFETIME * 4, interval=0.2)
        assert cluster.apply("p-late", {"workflow": "chain", "input": [5]}).returncode == 0
        done = await cluster.status_when("p-late", "completed", timeout=60)
    assert done["output"] is not None and _patches(port) > before


CHART_VALUES = Path(__file__).resolve().parents[2] / "charts" / "wayline" / "values.yaml"


async def test_the_active_replica_sigkilled_five_times_fails_over_within_10_s_each_time(
    cluster_of: Callable[..., Cluster],
) -> None:
    """The chart's peering lifetime bounds a failover: five times over, the active replica is
    SIGKILLed and, as a Deployment does, a replacement with a random priority starts at once
    (above the survivor's in every other round); a WorkflowRun created at the kill gets its
    run within 10 s each time, whichever replica ends up serving it."""
    lifetime = yaml.safe_load(CHART_VALUES.read_text())["operator"]["peeringLifetimeSeconds"]
    peering = ("--peering", "wayline-failover", "--peering-lifetime", str(lifetime))
    rng = random.Random()
    first, second = rng.sample(range(10**6, 10**8), 2)
    cluster = cluster_of(
        (*peering, "--priority", str(first)), (*peering, "--priority", str(second))
    )
    alive: dict[int, Replica] = dict(zip((first, second), cluster.replicas, strict=True))  # type: ignore[attr-defined]
    path = Path(cluster.plane.kubeconfig).parent / f"{cluster.namespace}-failover.json"
    path.write_text(json.dumps(peering_object("wayline-failover", cluster.namespace)))
    cluster.kubectl("apply", "-f", str(path))
    for replica in alive.values():
        replica.start()

    async def settled() -> bool:
        """Both live replicas are peers (the dead one's entry is gone) and the higher works."""
        got = await asyncio.to_thread(cluster.get, "wayline-failover", "kopfpeering")
        top = alive[max(alive)]
        return len(got.get("status") or {}) == 2 and "Resuming operations" in top.text()

    await wait_for(settled, timeout=60, interval=0.2)
    failovers: list[float] = []
    for round_ in range(5):
        victim = alive.pop(max(alive))
        survivor = max(alive)
        if round_ % 2 == 0:
            priority = survivor + rng.randint(1, 10**6)
        else:
            priority = rng.randint(1, survivor - 1)
        await asyncio.sleep(1.0)  # let the pause of a lower replica reach kopf
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        name = f"fo-{round_}"
        assert cluster.apply(name, {"workflow": "chain", "input": [1]}).returncode == 0
        replacement = cluster_of((*peering, "--priority", str(priority))).replicas[-1]  # type: ignore[attr-defined]
        replacement.start()
        alive[priority] = replacement
        await wait_for(lambda n=name: _has_run(cluster, n), timeout=60, interval=0.1)
        failovers.append(time.monotonic() - killed)
        await wait_for(settled, timeout=60, interval=0.2)
    print(
        f"\nfailover after a SIGKILL of the active replica (lifetime {lifetime} s), 5 tries: "
        f"{min(failovers):.1f}-{max(failovers):.1f} s ({', '.join(f'{f:.1f}' for f in failovers)})"
    )
    assert all(f < 10.0 for f in failovers), failovers


async def _resumed_twice(replica: Replica) -> bool:
    return replica.text().count("Resuming operations") >= 2


async def _has_run(cluster: Cluster, name: str) -> bool:
    status = await asyncio.to_thread(lambda: cluster.get(name).get("status") or {})
    return bool(status.get("runId"))


async def test_an_operator_started_before_its_world_serves_as_soon_as_the_world_is_up(
    control_plane: Any, nats_server_own: Any, tmp_path: Path
) -> None:
    """``helm install`` starts NATS and the operator together: the operator's start finds no
    world. kopf tried its start again after 60 s (its default for a first retry), with a
    traceback each time: a fresh installation ran nothing for a minute after NATS was up."""
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0
    url = nats_server_own.url
    nats_server_own.stop()
    env = _kubeconfig_env(url, control_plane.kubeconfig)
    operator = Replica(namespace, env, tmp_path / "operator.log")
    operator.start()
    world = wayline.open_world(url)
    try:
        cluster = Cluster(control_plane, namespace, world, wayline.Client(world), operator)
        assert cluster.apply("early", {"workflow": "chain", "input": [3]}).returncode == 0
        said = await operator.said(r"(\w+) kopf.activities.startup: .*WORLD_UNAVAILABLE")
        assert said[1] == "WARNING", said[0]  # every helm install meets it: not an ERROR
        nats_server_own.start()
        await world.start()
        async with wayline.Worker(world, APPS, settings=settings()):
            status = await cluster.status_when("early", "completed", timeout=20)
        assert status["output"] == 3
    finally:
        operator.stop()
        await world.close()
    assert "Traceback" not in operator.text()


async def test_probes_and_schedule_ticks_write_no_log_lines(
    control_plane: Any, cluster_of: Callable[..., Cluster]
) -> None:
    """At INFO the operator said a line per liveness probe (aiohttp's access log, every 10 s
    from the chart's probe) and one per schedule per tick (kopf's ``Timer 'tick'
    succeeded``, every 10 s): routine, and they buried what mattered."""
    port = free_port()
    cluster = cluster_of(("--liveness", f"http://127.0.0.1:{port}/healthz"))
    replica: Replica = cluster.operator  # type: ignore[assignment]
    replica.env = {**replica.env, "WAYLINE_OPERATOR_SCHEDULE_SECONDS": "0.2"}
    replica.start()
    schedule = {"schedule": "0 0 1 1 *", "workflow": "chain", "input": [1]}
    assert cluster.apply("yearly", schedule, "WorkflowSchedule").returncode == 0

    def probed() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)

    async def answered() -> bool:
        try:
            return await asyncio.to_thread(probed)
        except OSError:
            return False

    await wait_for(answered, timeout=30, interval=0.2)
    for _ in range(3):
        assert await asyncio.to_thread(probed)
    ticked = await wait_for(lambda: _ticks(cluster, "yearly"), timeout=30, interval=0.2)
    await asyncio.sleep(1.0)  # five more ticks of the schedule
    assert ticked
    text = replica.text()
    assert "/healthz" not in text and "Timer 'tick'" not in text, text


async def _ticks(cluster: Cluster, name: str) -> bool:
    status = await asyncio.to_thread(lambda: cluster.get(name, "wfs").get("status") or {})
    return bool(status.get("nextScheduleTime"))
