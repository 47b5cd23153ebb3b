"""What the autoscaler's three counts of one topic cost on NATS: ``ready_messages``,
``in_flight_messages`` and ``delayed_messages``, each asked for one topic that holds a few
messages (one of the default priority, one of priority 3, one with a fairness key, one held).

    python bench/queue_counts.py [--calls 50] [--repeat 3]

Per repetition, on a fresh prefix of a throwaway nats-server: the messages are sent, one is
received and held, then each count is asked ``--calls`` times in a row. Printed: the median
milliseconds a call, min-max over the repetitions; then every other message is received too
(so each subject holding one has its consumer), each is sent again, and ``ready_messages`` is
measured once more. The counts ask the server about every
subject a topic's ready messages may live on, so their cost follows how many there are.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from wayline.world import open_world

TOPIC = "counts-bench"


async def median_ms(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    took = []
    for _ in range(calls):
        began = time.perf_counter()
        await call()
        took.append((time.perf_counter() - began) * 1000)
    return statistics.median(took)


async def one(url: str, calls: int) -> dict[str, float]:
    world = open_world(url)
    await world.start()
    try:
        await world.enqueue(TOPIC, {"n": 1})
        await world.enqueue(TOPIC, {"n": 2, "_priority": 3})
        await world.enqueue(TOPIC, {"n": 3, "_fairnessKey": "tenant"})
        await world.enqueue(TOPIC, {"n": 4})
        held = await world.receive(TOPIC, max_messages=1, wait_seconds=2)
        assert held
        figures = {
            "ready": await median_ms(lambda: world.ready_messages([TOPIC]), calls),
            "in flight": await median_ms(lambda: world.in_flight_messages([TOPIC]), calls),
            "delayed": await median_ms(
                lambda: world.delayed_messages([TOPIC], time.time() + 60), calls
            ),
        }
        # Every subject holding a message read once (so each has its consumer), and as much
        # sent to them again: the counts of a topic its workers have served for a while.
        rest = await world.receive(TOPIC, max_messages=10, wait_seconds=2)
        assert len(rest) == 3
        for n in range(1, 4):
            await world.enqueue(TOPIC, rest[n - 1].payload)
        figures["ready, every subject read"] = await median_ms(
            lambda: world.ready_messages([TOPIC]), calls
        )
        return figures
    finally:
        await world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for nats_server
    from nats_server import machine, world_url

    print(machine())
    figures: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        with world_url("nats", "counts") as url:
            for name, ms in asyncio.run(one(url, args.calls)).items():
                figures.setdefault(name, []).append(ms)
    for name, values in figures.items():
        print(f"{name}: {min(values):.1f}-{max(values):.1f} ms a call (median of {args.calls})")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
