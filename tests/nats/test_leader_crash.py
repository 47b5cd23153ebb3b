"""SIGKILL the leader of the event log's stream in a three-node cluster while 60 runs are in
their steps, and restart it: every run completes, and no step body runs again after one of its
executions has ended (a counter test). The completion of a step rides on the run's next
append, which fails for the length of the stream's leader election ("no responders"); it is
asked again while the worker still provably holds its delivery, instead of being lost with
the delivery's attempt (the step then ran again after a whole visibility window)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import NatsCluster
from tests.runtime.harness import of_type, settings, wait_for
from wayline._core.events import EventType
from wayline.worlds.nats import NatsWorld

pytestmark = pytest.mark.slow

RUNS = 60
STEPS = 4
STEP_SECONDS = 0.8

# (run label, step index) -> [start, end or None] per execution of the body, in this process
EXECUTIONS: dict[tuple[str, int], list[list[float | None]]] = defaultdict(list)


@wayline.step
async def timed_step(label: str, i: int) -> int:
    execution: list[float | None] = [time.monotonic(), None]
    EXECUTIONS[label, i].append(execution)
    await asyncio.sleep(STEP_SECONDS)
    execution[1] = time.monotonic()
    return i


@wayline.workflow
async def steps_through_a_crash(label: str) -> int:
    total = 0
    for i in range(STEPS):
        total += await timed_step(label, i)
    return total


async def _leader(world: NatsWorld) -> str:
    import nats

    nc = await nats.connect(world._options.servers, connect_timeout=2)
    try:
        info = await nc.jetstream().stream_info(world.names.events_stream)
        leader: str = info.cluster.leader
        return leader
    finally:
        await nc.close()


def _reruns(runs: list[str]) -> list[tuple[str, int]]:
    """The steps whose body started again after an earlier execution of it had ended."""
    out = []
    for label in runs:
        for i in range(STEPS):
            ends = [e for _, e in EXECUTIONS[label, i] if e is not None]
            if ends and any(start > min(ends) for start, _ in EXECUTIONS[label, i]):
                out.append((label, i))
    return out


@pytest.mark.parametrize("workers_on", ["any node", "the leader"])
async def test_a_killed_event_log_leader_reruns_no_finished_step(
    nats_cluster: NatsCluster, workers_on: str
) -> None:
    """``the leader``: both workers are connected to the node that is killed, so they lose
    their connection, and with it the proof that they hold their deliveries (every renewal is
    refused from then on): their bodies are cut off, but what the bodies did before is still
    recorded through the election (it was given up at the refusal: every step that had ended
    ran again after the visibility window)."""
    prefix = f"lc{time.monotonic_ns() % 10**9}"

    def world(urls: list[str] | None = None) -> NatsWorld:
        return NatsWorld(
            urls or nats_cluster.urls,
            prefix=prefix,
            replicas=3,
            visibility_seconds=30.0,
            connect_attempts=5,
            reconnect_time_wait=0.2,
        )

    worlds = [world()]
    await worlds[0].start()  # provisions the streams: their leader is known from here on
    urls = None
    if workers_on == "the leader":  # the others are learned from it, to reconnect to
        urls = [nats_cluster.by_name(await _leader(worlds[0])).url]
    worlds += [world(urls) for _ in range(2)]
    for w in worlds[1:]:
        await w.start()
    try:
        client = wayline.Client(worlds[0])
        labels = [f"{prefix}-{n}" for n in range(RUNS)]
        async with (
            wayline.Worker(worlds[1], [steps_through_a_crash], settings=settings()),
            wayline.Worker(worlds[2], [steps_through_a_crash], settings=settings()),
        ):
            handles = [await client.start(steps_through_a_crash, label) for label in labels]

            async def mid_steps() -> bool:
                ended = sum(
                    1 for label in labels for _, end in EXECUTIONS[label, 0] if end is not None
                )
                return ended >= RUNS // 2

            await wait_for(mid_steps, timeout=30)
            leader = nats_cluster.by_name(await _leader(worlds[0]))
            await asyncio.sleep(STEP_SECONDS / 2)  # into the next steps' bodies
            crashed = time.monotonic()
            leader.kill()
            await asyncio.sleep(2.0)
            leader.start(timeout=30)
            results: list[Any] = await asyncio.gather(*(h.result(timeout=80) for h in handles))
        assert results == [sum(range(STEPS))] * RUNS
        # how long the crash held the runs up: until each run started its next body
        stall = max(
            min(start for start, _ in runs if start > crashed) - crashed
            for runs in EXECUTIONS.values()
            if any(start > crashed for start, _ in runs)
        )
        reruns = _reruns(labels)
        print(f"leader crash: stall {stall:.1f}s, bodies run again after they ended: {reruns}")
        assert reruns == []
        for handle in handles:  # each retried append stored once: one completion a step
            events = await handle.events()
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            completed = [e.correlation_id for e in of_type(events, EventType.STEP_COMPLETED)]
            assert len(completed) == len(set(completed)) == STEPS
    finally:
        for w in worlds:
            await w.close()
