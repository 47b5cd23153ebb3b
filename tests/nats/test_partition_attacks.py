"""Attacks on a NATS world of three partitions (docs/nats.md, "Partitions"), on a real
nats-server: work split between workers that each consume some partitions, delayed retries,
debounced starts, archiving and the queue counts the operator's autoscaler reads, each with
runs or messages in every partition. What these tests check held on the merged code; the one
defect found (``drain_lanes`` in a partition other than the first) is tested in
``test_lane_drain.py``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime import debounce_flows, flows
from tests.runtime.harness import settings, wait_for
from wayline._core.ids import new_run_id
from wayline.worlds.nats.names import partition_of


def _runs_of(part: int, n: int) -> list[str]:
    """``n`` fresh run ids that hash to partition ``part`` of three."""
    out: list[str] = []
    while len(out) < n:
        run_id = new_run_id()
        if partition_of(run_id, 3) == part:
            out.append(run_id)
    return out


async def test_two_workers_that_split_the_partitions_finish_delayed_retries_of_every_one(
    open_nats_world: OpenWorlds, tmp_path: Path
) -> None:
    """One worker consumes partitions 0 and 1, another partition 2 only: every run, in any
    partition, finishes, and its step (which fails once and is retried after a delay, a
    delayed message of the run's partition) ran exactly twice."""
    client_world = await open_nats_world(partitions=3)
    low = await open_nats_world(partitions=3, consume="0,1")
    high = await open_nats_world(partitions=3, consume="2")
    client = wayline.Client(client_world)
    async with (
        wayline.Worker(low, [flows.retrying], settings=settings()),
        wayline.Worker(high, [flows.retrying], settings=settings()),
    ):
        starts = []
        for part in range(3):
            for run_id in _runs_of(part, 2):
                path = str(tmp_path / f"attack-split-{run_id}")
                starts.append(
                    (
                        path,
                        await client.start_with(
                            wayline.StartOptions(run_id=run_id), flows.retrying, path, 1
                        ),
                    )
                )
        for path, handle in starts:
            assert await handle.result(timeout=60) == 2
            assert [line.split(":")[0] for line in flows.lines(path)] == ["1", "2"]


async def test_debounced_starts_of_one_key_make_one_run_whatever_the_partitions(
    open_nats_world: OpenWorlds, tmp_path: Path
) -> None:
    """A debounce key's runs are the generations of one business id: starts from two
    processes collapse into one run, which runs the last input, for keys in any partition."""
    one, other = await open_nats_world(partitions=3), await open_nats_world(partitions=3)
    clients = [wayline.Client(one), wayline.Client(other)]
    runs: dict[str, str] = {}
    for doc in (f"attack-doc-{i}" for i in range(6)):
        path = str(tmp_path / doc)
        handles = [
            await clients[v % 2].start(debounce_flows.reindex, path, doc, v) for v in range(4)
        ]
        assert len({h.run_id for h in handles}) == 1
        runs[path] = handles[0].run_id
    assert len({partition_of(r, 3) for r in runs.values()}) > 1
    async with wayline.Worker(one, [debounce_flows.reindex], settings=settings()):
        for path, run_id in runs.items():
            doc = Path(path).name
            assert await clients[1].handle(run_id).result(timeout=30) == f"{doc}@3"
        await asyncio.sleep(1.5)  # a second run of a key would have begun by now
    for path in runs:
        assert debounce_flows.ran(path) == [f"{Path(path).name} 3"]


async def test_archiving_takes_runs_of_every_partition_and_reads_them_back(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(partitions=3)
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.chain], settings=settings()):
        ids = [r for part in range(3) for r in _runs_of(part, 2)]
        handles = [
            await client.start_with(wayline.StartOptions(run_id=r), flows.chain, 3)
            for i, r in enumerate(ids)
        ]
        assert [await h.result(timeout=30) for h in handles] == [3] * 6
    assert await world.archive_runs(older_than=-time.time()) == 6
    assert await world.list_runs(limit=100) == []
    for run_id in ids:
        kept = await world.archived_run(run_id)
        assert kept is not None, run_id
        info, events = kept
        assert info.run_id == run_id and info.status is wayline.RunStatus.COMPLETED
        assert events and events[-1].type.value == "run_completed"


async def test_the_queue_counts_sum_work_of_every_partition(
    open_nats_world: OpenWorlds,
) -> None:
    """What the operator's autoscaler reads (ready, in flight, delayed, the queue depths)
    counts messages of every partition, a partition no worker consumed yet included."""
    world = await open_nats_world(partitions=3)
    topic = "attack-counts"
    for part in range(3):
        for run_id in _runs_of(part, part + 1):  # 1, 2 and 3 messages
            await world.enqueue(topic, {"runId": run_id})
    [later] = _runs_of(2, 1)
    await world.enqueue(topic, {"runId": later}, delay_seconds=600)
    assert await world.ready_messages([topic]) == {topic: 6}
    assert await world.delayed_messages([topic], time.time() + 3600) == {topic: 1}
    depths = {d.topic: d.ready for d in await world.queue_depths() or []}
    assert depths[topic] == 6
    taken: list[Any] = []
    while len(taken) < 6:
        taken += await world.receive(topic, max_messages=6 - len(taken), wait_seconds=1)
    assert {partition_of(str(d.payload["runId"]), 3) for d in taken} == {0, 1, 2}
    assert await world.in_flight_messages([topic]) == {topic: 6}
    assert await world.ready_messages([topic]) == {topic: 0}
    for delivery in taken:
        assert await world.ack(delivery)
    assert await world.in_flight_messages([topic]) == {topic: 0}


async def test_a_run_of_partition_two_is_resumed_and_cancelled_from_a_client_elsewhere(
    open_nats_world: OpenWorlds,
) -> None:
    """Runs of partition 2 wait on hooks, served by a worker that consumes partition 2 only;
    a client's world (which consumes every partition, but runs no worker) resumes one by its
    token as a webhook does (twice, under one delivery id) and cancels the other: the resume
    and the cancel reach partition 2's queue."""
    client_world = await open_nats_world(partitions=3)
    served = await open_nats_world(partitions=3, consume="2")
    client = wayline.Client(client_world)
    async with wayline.Worker(served, [flows.kid_waits], settings=settings()):
        resumed, cancelled = _runs_of(2, 2)
        tokens = {r: f"attack-hook-{r}" for r in (resumed, cancelled)}
        handles = {
            r: await client.start_with(wayline.StartOptions(run_id=r), flows.kid_waits, t)
            for r, t in tokens.items()
        }
        for token in tokens.values():
            await wait_for(lambda token=token: client_world.get_hook(token), timeout=20)
        # as the console's webhook resumes it: once, under the POST's Idempotency-Key,
        # and a retried POST answers as the first did
        for _ in range(2):
            assert resumed == await client.resume_hook(
                tokens[resumed], {"to": "partition 2"}, delivery_id="attack-post", once=True
            )
        assert await handles[resumed].result(timeout=20) == {"to": "partition 2"}
        assert await client.cancel(cancelled, "from a client")

        async def ended() -> bool:
            info = await client.get_run(cancelled)
            return info is not None and info.status is wayline.RunStatus.CANCELLED

        await wait_for(ended, timeout=20)


async def _started_by_id_in_partition_two(url: str) -> tuple[str, str]:
    """A run started under a business id whose generation's run id hashes to partition 2,
    run to its end; its business id and run id."""
    from wayline.worlds.nats import NatsWorld

    async with NatsWorld.from_url(url) as world:
        client = wayline.Client(world)
        while True:
            business = f"attack-order-{new_run_id()[-8:]}"
            handle = await client.start_with(wayline.StartOptions(id=business), flows.chain, 3)
            if partition_of(handle.run_id, 3) == 2:
                break
        async with wayline.Worker(world, [flows.chain], settings=settings()):
            assert await handle.result(timeout=30) == 3
        return business, handle.run_id


def test_runs_show_reads_a_run_of_partition_two_by_its_business_id(
    nats_server: Any, capsys: Any
) -> None:
    """``wayline runs show`` on a world URL with ``partitions=3`` resolves a business id to
    a run of partition 2 and shows its timeline to its end."""
    import json

    from wayline.cli import main

    url = f"{nats_server.url}?prefix=attackshow{new_run_id()[-8:]}&partitions=3"
    business, run_id = asyncio.run(_started_by_id_in_partition_two(url))
    capsys.readouterr()
    assert main(["runs", "show", business, "--world", url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["runId"] == run_id and shown["status"] == "completed", shown
