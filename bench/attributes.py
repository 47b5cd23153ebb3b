"""How long a selective search attribute query takes among many runs, on each world.

    python bench/attributes.py [--worlds local,nats] [--runs 100000] [--tenants 1000]
        [--repeat 3] [--queries 10]

Fills a fresh world with ``--runs`` runs of one workflow, each created with two search
attributes (``tenant``: one of ``--tenants`` values, so about runs/tenants runs each;
``amount``: 0 to 999), written as ``Client.start`` writes a run's ``run_created`` (its start
message is left out: no worker serves these runs, and the queue is not what is measured).
Then asks ``Client.list_runs(where=["tenant=tN", "amount>500"], status="pending",
since="1h", workflow=...)``, the query of ``wayline runs list --where ... --status ...
--since ... --workflow ...``, for ``--queries`` tenants in turn, and reports the median and
the slowest of those calls per repetition, min-max over ``--repeat`` repetitions. NATS runs
on a throwaway nats-server (``bench/nats_server.py``) with the server's default sync setting.
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
import platform
import random
import statistics
import time

import wayline
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id

WORKFLOW = "bench_orders"
_CONCURRENT = 200
"""Runs created at once while the world is filled."""


async def fill(world: wayline.World, runs: int, tenants: int) -> float:
    """Create ``runs`` runs; returns the seconds it took."""
    rng = random.Random(7)
    began = time.perf_counter()
    for start in range(0, runs, _CONCURRENT):
        batch = []
        for _ in range(min(_CONCURRENT, runs - start)):
            data = {
                "workflow": WORKFLOW,
                "input": {"args": []},
                "search": {"tenant": f"t{rng.randrange(tenants)}", "amount": rng.randrange(1000)},
            }
            event = NewEvent(EventType.RUN_CREATED, data=data)
            batch.append(world.append(new_run_id(), [event], expected_seq=0))
        await asyncio.gather(*batch)
    return time.perf_counter() - began


async def queries(client: wayline.Client, tenants: int, count: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        where = [f"tenant=t{rng.randrange(tenants)}", "amount>500"]
        began = time.perf_counter()
        found = await client.list_runs(
            status="pending", since="1h", workflow=WORKFLOW, where=where, limit=1000
        )
        out.append((time.perf_counter() - began) * 1000)
        assert all(r.search_attributes["amount"] > 500 for r in found)
    return out


async def bench(url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    world = wayline.open_world(url)
    await world.start()
    try:
        filled = await fill(world, args.runs, args.tenants)
        print(f"  filled {args.runs} runs in {filled:.1f} s", flush=True)
        client = wayline.Client(world)
        await queries(client, args.tenants, 3, seed=0)  # warm: connections, caches, pages
        medians, slowest = [], []
        for rep in range(args.repeat):
            times = await queries(client, args.tenants, args.queries, seed=rep + 1)
            medians.append(statistics.median(times))
            slowest.append(max(times))
            print(f"  repetition {rep + 1}: median {medians[-1]:.2f} ms, slowest {slowest[-1]:.2f}")
        return {"median": medians, "slowest": slowest}
    finally:
        await world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for nats_server
    from nats_server import world_url

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {os.getloadavg()}"
    )
    for kind in args.worlds.split(","):
        print(f"{kind}: {args.runs} runs, {args.tenants} tenants", flush=True)
        with world_url(kind, "attrs") as url:
            figures = asyncio.run(bench(url, args))
        for name, values in figures.items():
            print(f"{kind} {name} query (ms): {min(values):.2f}-{max(values):.2f}")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
