"""How long a console's first runs calls take on NATS while its runs model loads: answered from
the index's names at once (now) or after waiting for the load (before), at 100,000 runs.

    python bench/console_first_call.py [--runs 100000] [--rounds 3]

Fills one throwaway nats-server's world with ``--runs`` runs (as bench/console.py does), then,
``--rounds`` times, alternating the two ways, opens a fresh world (a console process starting
now: nothing in memory), and times its first ``GET /api/runs`` (a page and the counts) and
how many calls it answers, and how many it refuses, until the model is loaded.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import os
import time
from typing import Any

import httpx

import wayline
from wayline.cli.console import create_app
from wayline.worlds.nats.runs_listing import NatsRunsListing

WAITED = 120.0  # what a read waited for the load before (the old LOAD_WAIT)


async def _waiting_followed(self: Any) -> Any:
    """The read before this change: wait for the load (bounded), then use the model."""
    model = self.model
    if model is None:
        return None
    if not model.loaded and not await model.ready(WAITED):
        return None
    await model.catch_up()
    return model


async def one_round(url: str, wait: bool) -> dict[str, float]:
    now = NatsRunsListing._followed
    if wait:
        NatsRunsListing._followed = _waiting_followed  # type: ignore[method-assign]
    world = wayline.open_world(url)
    await world.start()
    try:
        app = create_app(wayline.Client(world), world_url=url)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600
        ) as http:
            began = time.perf_counter()
            first = await http.get("/api/runs")
            first_s = time.perf_counter() - began
            answered, refused = int(first.status_code == 200), int(first.status_code != 200)
            model = world._listing.model  # type: ignore[attr-defined]
            while model is not None and not model.loaded:
                answer = await http.get("/api/runs")
                answered += answer.status_code == 200
                refused += answer.status_code != 200
            loaded_s = time.perf_counter() - began
        return {
            "first call s": first_s,
            "model loaded s": loaded_s,
            "answered": answered,
            "refused": refused,
        }
    finally:
        NatsRunsListing._followed = now  # type: ignore[method-assign]
        await world.close()


async def run(url: str, args: argparse.Namespace) -> None:
    from console import fill

    world = wayline.open_world(url)
    await world.start()
    try:
        print(f"  filled {args.runs} runs in {await fill(world, args.runs):.1f} s", flush=True)
    finally:
        await world.close()
    for i in range(args.rounds):
        for wait in (True, False):
            got = await one_round(url, wait)
            way = "waits for the load (before)" if wait else "from the names at once (now)"
            print(f"  round {i + 1}, {way}: {got}; load {os.getloadavg()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nats_server import world_url

    print(f"{os.cpu_count()} cores; load average {os.getloadavg()}", flush=True)
    with world_url("nats", "console-first") as url:
        asyncio.run(run(url, args))
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
