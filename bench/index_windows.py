"""What the server spends on the runs index's batch direct gets: the windows a console's first
page reads from the index's tail, with the index's subject filter and without, and the counts
by status, each as wall time and the server's CPU time.

    python bench/index_windows.py --keep DIR [--runs 100000] [--rounds 3]

Serves the world a ``bench/console_start.py --keep DIR --runs N`` run filled (it fills one
when the folder holds none), then, each round, reads the index's last 3,000 sequence numbers in
six windows of 500 asked together, the three ways, and the seven counts by status asked
together (``RunsIndex.counts``). The server's CPU time is read from ``/proc``.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

_STATUSES = ("pending", "running", "completed", "failed", "cancelled", "paused", "sleeping")


async def batch(nc: Any, stream: str, request: dict[str, Any]) -> int:
    """How many messages one batch direct get answers, its status message included."""
    inbox = nc.new_inbox()
    count = 0
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_msg(msg: Any) -> None:
        nonlocal count
        count += 1
        if msg.headers and msg.headers.get("Status") and not done.done():
            done.set_result(count)

    sub = await nc.subscribe(inbox, cb=on_msg)
    try:
        await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), inbox)
        return await asyncio.wait_for(done, 60)
    finally:
        await sub.unsubscribe()


async def measure(url: str, server: int, rounds: int) -> None:
    from console_start import cpu_ms

    import nats

    base, prefix = url.split("?prefix=")
    nc = await nats.connect(base)
    stream = f"{prefix}_runs"
    info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"{}")).data)
    last = int(info["state"]["last_seq"])
    starts = [last - 3000 + i * 500 for i in range(6)]
    kinds: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "windows, the index's filter": lambda: [
            {"seq": s, "batch": 500, "next_by_subj": f"{prefix}.ri.>"} for s in starts
        ],
        "windows, no filter": lambda: [{"seq": s, "batch": 500} for s in starts],
        "windows, filter and no_hdr": lambda: [
            {"seq": s, "batch": 500, "next_by_subj": f"{prefix}.ri.>", "no_hdr": True}
            for s in starts
        ],
        "counts by status": lambda: [
            {"seq": 0, "batch": 1, "next_by_subj": f"{prefix}.ri.{s}.*.*.*"} for s in _STATUSES
        ],
    }
    try:
        for i in range(rounds):
            for name, requests in kinds.items():
                cpu, began = cpu_ms(server), time.perf_counter()
                got = await asyncio.gather(*(batch(nc, stream, r) for r in requests()))
                wall = (time.perf_counter() - began) * 1000
                print(
                    f"round {i + 1}, {name}: {wall:.1f} ms, server CPU {cpu_ms(server) - cpu:.0f}"
                    f" ms, {sum(got)} messages; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", required=True, help="the folder of a console_start.py --keep")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    from console_start import kept_world

    sys.path.insert(0, HERE)  # console_start takes it out as it is imported
    from nats_server import machine

    print(machine(), flush=True)
    with kept_world(args.keep, args.runs) as (url, server):
        asyncio.run(measure(url, server, args.rounds))


if __name__ == "__main__":
    main()
