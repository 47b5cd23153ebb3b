"""At which start position a small tenant's runs begin behind a large tenant's backlog.

    python bench/fairness.py [--worlds local,nats] [--a 10000] [--b 10] [--repeat 3]
                             [--b-priority N] [--a-key A] [--b-key B]

Per repetition, on a fresh world: ``Client.start_with`` starts ``--a`` runs with
``fairness_key="A"``, then ``--b`` runs with ``fairness_key="B"`` (and ``priority=N`` with
``--b-priority``), all on one queue (so their start messages share one topic, as the runs of one
worker's route do). ``--a-key``/``--b-key`` name the two keys instead (``--b-key B12`` is a key
whose hash picks A's lane on NATS, ``names.lane_of``: the case of two keys sharing a lane).
Nothing serves them meanwhile. Then the queue is drained as a worker with one free slot takes
work, one ``receive`` at a time, each acked at once, and the position (1 = the first work taken)
of each of B's starts is noted; draining stops once all of B's were taken. Printed: the
positions of B's first and last start, min-max over the repetitions. A receive is what a
worker's free slot does first with a run, so the position is the slot at which the run starts.
NATS runs on a throwaway nats-server (``bench/nats_server.py``).
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
# operator module for every import below: take it off the path first
sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import os
import time

import wayline
from wayline.world import FLOW_TOPIC, open_world
from wayline.world.routing import served_topics

QUEUE = "fairness-bench"


@wayline.workflow(name="bench_fairness.tenant_run")
async def tenant_run(label: str) -> str:
    return label


async def start_all(
    client: wayline.Client, key: str, count: int, priority: int | None = None
) -> set[str]:
    options = wayline.StartOptions(queue=QUEUE, fairness_key=key)
    if priority is not None:
        options = wayline.StartOptions(queue=QUEUE, fairness_key=key, priority=priority)
    started: set[str] = set()
    for first in range(0, count, 100):  # a hundred at a time: the order between keys holds
        handles = await asyncio.gather(
            *(
                client.start_with(options, tenant_run, f"{key}{i}")
                for i in range(first, min(count, first + 100))
            )
        )
        started.update(h.run_id for h in handles)
    return started


async def one(
    url: str, a: int, b: int, b_priority: int | None, keys: tuple[str, str] = ("A", "B")
) -> list[int]:
    """The positions at which B's runs were taken, in order."""
    world = open_world(url)
    await world.start()
    try:
        client = wayline.Client(world)
        began = time.monotonic()
        await start_all(client, keys[0], a)
        b_runs = await start_all(client, keys[1], b, b_priority)
        print(f"  {a + b} runs started in {time.monotonic() - began:.1f} s", flush=True)
        topic = served_topics(FLOW_TOPIC, [], QUEUE)[0]
        positions: list[int] = []
        taken = 0
        while len(positions) < b:
            got = await world.receive(topic, max_messages=1, wait_seconds=5)
            if not got:
                raise RuntimeError(f"the queue ran dry after {taken} starts")
            for delivery in got:
                taken += 1
                if (delivery.payload or {}).get("runId") in b_runs:
                    positions.append(taken)
                await world.ack(delivery)
        return positions
    finally:
        await world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--a", type=int, default=10_000)
    parser.add_argument("--b", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--b-priority", type=int, default=None, help="B's priority (0-9)")
    parser.add_argument("--a-key", default="A", help="the large tenant's fairness key")
    parser.add_argument("--b-key", default="B", help="the small tenant's fairness key")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for nats_server
    from nats_server import machine, world_url

    print(machine())
    for kind in args.worlds.split(","):
        firsts: list[int] = []
        lasts: list[int] = []
        for rep in range(args.repeat):
            print(
                f"{kind}: {args.a} runs of {args.a_key}, then {args.b} of {args.b_key} "
                f"(repetition {rep + 1})"
            )
            with world_url(kind, "fair") as url:
                keys = (args.a_key, args.b_key)
                positions = asyncio.run(one(url, args.a, args.b, args.b_priority, keys))
            print(f"  B's runs started at positions {positions}", flush=True)
            firsts.append(positions[0])
            lasts.append(positions[-1])
        print(
            f"{kind}: B's first run at position {min(firsts)}-{max(firsts)}, "
            f"its last at {min(lasts)}-{max(lasts)} (min-max over {args.repeat})"
        )
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
