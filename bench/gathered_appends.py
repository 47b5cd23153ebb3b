"""Steps/s of 100 runs at once on NATS with the appends of concurrent runs gathered into atomic
batches (``worlds/nats/gather.py``) and without (``gather_appends=0``), measured in the same
process on the same server, alternating the two settings (off first in odd repetitions, on
first in even ones), on a server with the default ``sync_interval`` and on one with
``sync_interval: always``.

    python bench/gathered_appends.py [--repeat 3] [--runs 100] [--worlds nats,nats-always]

Prints min-max over the repetitions of steps/s, nats-server CPU seconds per 1,000 steps, and
the atomic batches stored per 1,000 steps; bench/RESULTS.md's "NATS appends gathered" section
is written from its output by hand.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

from flows import bench_chain
from nats_server import nats_server_process
from steps import burst, server_cpu

import wayline


async def measure(url: str, runs: int, pid: int) -> dict[str, float]:
    world: Any = wayline.open_world(url)
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [bench_chain]):
        await burst(client, runs)  # warm up
        gather = world._log.gather
        batches, cpu = gather.batches, server_cpu(pid)
        rate = await burst(client, runs)
        steps = runs * 10
        return {
            "steps/s": rate,
            "nats-server CPU s / 1,000 steps": (server_cpu(pid) - cpu) * 1000 / steps,
            "atomic batches / 1,000 steps": (gather.batches - batches) * 1000 / steps,
        }


def span(values: list[float]) -> str:
    return f"{min(values):.4g}-{max(values):.4g}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--worlds", default="nats,nats-always")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for kind in args.worlds.split(","):
        sync = "always" if kind == "nats-always" else None
        with nats_server_process(sync) as (base, pid):
            got: dict[int, list[dict[str, float]]] = {0: [], 1: []}
            for rep in range(args.repeat):
                order = (0, 1) if rep % 2 == 0 else (1, 0)
                for gather in order:
                    prefix = f"g{rep}x{gather}x{os.getpid()}"
                    url = f"{base}?prefix={prefix}&gather_appends={gather}"
                    figures = await measure(url, args.runs, pid)
                    got[gather].append(figures)
                    shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
                    print(f"{kind} rep {rep + 1} gather={gather}: {shown}", flush=True)
            for gather in (0, 1):
                for name in got[gather][0]:
                    values = [f[name] for f in got[gather]]
                    label = "on" if gather else "off"
                    print(f"{kind} gather {label}: {name} {span(values)}", flush=True)
            ratios = [
                on["steps/s"] / off["steps/s"] for off, on in zip(got[0], got[1], strict=True)
            ]
            print(f"{kind}: steps/s on / off per repetition {span(ratios)}", flush=True)
    print(f"load average at end: {os.getloadavg()} ({time.strftime('%H:%M UTC', time.gmtime())})")


if __name__ == "__main__":
    asyncio.run(main())
