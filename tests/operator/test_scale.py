"""Statuses follow the world's change feed, on a real kube-apiserver + etcd and on both worlds:
a resource whose run did not move is never written (counted by the API server itself, from
its ``/metrics``), and a change the feed missed still reaches the status through the resync."""

# ruff: noqa: F811 - the fixtures imported from test_workflowrun are parameters here

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path

import wayline
from tests.operator.test_workflowrun import (  # noqa: F401 - fixtures
    APPS,
    Cluster,
    cluster,
    crd_applied,
)
from tests.runtime.harness import settings, wait_for

IDLE = 12
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def requests(cluster: Cluster, code: str | None = None) -> Counter[tuple[str, str]]:
    """The API server's own count of requests, by (verb, resource[/subresource]); only those
    answered with HTTP ``code`` when it is given."""
    text = cluster.plane.kubectl("get", "--raw", "/metrics").stdout
    out: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
        if code is not None and labels.get("code") != code:
            continue
        what = labels.get("resource", "")
        if labels.get("subresource"):
            what += "/" + labels["subresource"]
        out[(labels.get("verb", ""), what)] += int(float(m["value"]))
    return out


def writes(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> dict[str, int]:
    """Writes to WorkflowRuns and Events between two samples, by verb and resource."""
    verbs = ("PATCH", "POST", "PUT", "DELETE")
    kinds = ("workflowruns", "workflowruns/status", "events")
    return {
        f"{verb} {kind}": after[(verb, kind)] - before[(verb, kind)]
        for verb in verbs
        for kind in kinds
        if after[(verb, kind)] != before[(verb, kind)]
    }


def restart_operator(cluster: Cluster, **env: str) -> None:
    cluster.operator.stop()
    cluster.operator.env.update(env)
    cluster.operator.start()


def apply_many(cluster: Cluster, names: list[str], token: str) -> None:
    items = [
        {
            "apiVersion": "wayline.dev/v1alpha1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": {"workflow": "kid_waits", "input": f"{token}-{name}"},
        }
        for name in names
    ]
    path = Path(cluster.plane.kubeconfig).parent / f"{cluster.namespace}-{token}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    cluster.kubectl("apply", "-f", str(path))


async def test_idle_runs_are_not_written(cluster: Cluster) -> None:
    # a short resync and decision-table sweep: idle runs are read often, and written never
    restart_operator(
        cluster,
        WAYLINE_OPERATOR_RESYNC_SECONDS="0.5",
        WAYLINE_OPERATOR_SWEEP_SECONDS="0.5",
    )
    names = [f"idle-{i}" for i in range(IDLE)]
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        apply_many(cluster, names, "tok")

        async def all_waiting() -> bool:
            listed = await asyncio.to_thread(cluster.kubectl, "get", "wfr", "-o", "json")
            items = json.loads(listed.stdout)["items"]
            summaries = [(i.get("status") or {}).get("waitingForSummary", "") for i in items]
            return len(items) == IDLE and all(s.startswith("hook ") for s in summaries)

        await wait_for(all_waiting, timeout=60, interval=0.5)
        await asyncio.sleep(1.0)  # the last writes' Events are posted
        before = requests(cluster)
        await asyncio.sleep(3.0)  # six resyncs and sweeps of every idle run
        idle = writes(before, requests(cluster))
        await cluster.client.resume_hook("tok-idle-0", "done")
        await cluster.status_when("idle-0", "completed")
        await asyncio.sleep(1.0)
        moved = writes(before, requests(cluster))
    assert idle == {}, f"idle runs were written: {idle}"
    # one run moved: its status is written (at most once per step of its story), and none of
    # the other runs' statuses
    assert 1 <= moved.get("PATCH workflowruns/status", 0) <= 3, moved
    assert moved.get("PATCH workflowruns", 0) == 0, moved


async def test_a_missed_change_reaches_the_status_through_the_resync(cluster: Cluster) -> None:
    """No change feed at all (every message missed): the resync alone brings each status to
    its run's end."""
    restart_operator(
        cluster,
        WAYLINE_OPERATOR_CHANGE_FEED="off",
        WAYLINE_OPERATOR_RESYNC_SECONDS="1",
        WAYLINE_OPERATOR_SWEEP_SECONDS="600",  # the decision table's pass reads nothing here
    )
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        cluster.apply("sum", {"workflow": "chain", "input": [4]})
        cluster.apply("waits", {"workflow": "kid_waits", "input": "tok-m"})
        await wait_for(lambda: cluster.world.get_hook("tok-m"), timeout=20)
        await cluster.client.resume_hook("tok-m", "late")
        done = await cluster.status_when("sum", "completed", timeout=30)
        waited = await cluster.status_when("waits", "completed", timeout=30)
    assert done["output"] == 6 and waited["output"] == "late"
    assert "no change feed" in cluster.operator.log.read_text()


SHORT = 6


async def test_a_short_run_costs_no_kopf_patch_one_status_write_and_one_or_two_events(
    cluster: Cluster,
) -> None:
    """kopf writes nothing on a creation (no finalizer, no diff-base annotation patch), and a
    run that ends before its first status write gets one status write and one Event (its
    RunStarted folded into RunSucceeded); counted by the API server itself."""
    names = [f"short-{i}" for i in range(SHORT)]
    before = requests(cluster)
    async with wayline.Worker(cluster.world, APPS, settings=settings()):
        # the worker is up and the operator's read of the registry is over 2 s old, as in
        # test_kubectl's fresh-install test: an operator forked from the zygote is up at once
        # and its first read can precede this worker, and a read under 2 s old is kept
        await asyncio.sleep(2.5)
        for name in names:
            assert cluster.apply(name, {"workflow": "chain", "input": [3]}).returncode == 0
        for name in names:
            await cluster.status_when(name, "completed", timeout=60)
        await asyncio.sleep(1.0)  # the last Events are posted
    got = writes(before, requests(cluster))
    assert got.get("POST workflowruns") == SHORT, got
    assert got.get("PATCH workflowruns", 0) == 0, got  # kopf adds no finalizer
    assert SHORT <= got.get("PATCH workflowruns/status", 0) <= 3 * SHORT, got
    for name in names:
        posted = {e["reason"]: e["message"] for e in cluster.events(name)}
        assert "RunSucceeded" in posted, posted
        if "RunStarted" not in posted:  # folded: the end says when the run started
            assert "(started " in posted["RunSucceeded"], posted
    assert got.get("POST events", 0) <= 2 * SHORT, got
