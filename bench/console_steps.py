"""How long the console's API takes to hand over a run of 5,000 steps, with the folds it keeps
between pages and without (a fold of the whole log per page, as before), on each world.

    python bench/console_steps.py [--worlds local,nats] [--steps 5000] [--repeat 3]

Writes one run of ``--steps`` completed steps to a fresh world (created, started, completed,
in appends of 500 steps, as tests/console/test_long_run.py does), then reads it as the run page
does, in-process (the console's ASGI app over httpx): the run, then every page of steps, 1,000
at a time. Each figure is min-max over ``--repeat`` such openings, each by a console made
afresh (so the first opening of each includes the fold); the folds each console made are
printed with it. NATS runs on a throwaway nats-server (``bench/nats_server.py``).
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
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

import wayline
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app

BATCH = 500


async def long_run(world: wayline.World, steps: int) -> str:
    handle = await wayline.Client(world).start("bench_console_steps")
    await world.append(handle.run_id, [NewEvent(EventType.RUN_STARTED)])
    for first in range(0, steps, BATCH):
        batch: list[NewEvent] = []
        for i in range(first, min(first + BATCH, steps)):
            cid = f"s{i + 1}"
            batch += [
                NewEvent(EventType.STEP_CREATED, cid, {"stepName": f"s{i:04d}", "occurrence": 0}),
                NewEvent(EventType.STEP_STARTED, cid, {"attempt": 1}),
                NewEvent(EventType.STEP_COMPLETED, cid, {"result": i}),
            ]
        await world.append(handle.run_id, batch)
    return handle.run_id


async def opening(http: httpx.AsyncClient, run_id: str) -> float:
    """Milliseconds to read the run and every page of its steps, as the run page does."""
    began = time.perf_counter()
    answer = (await http.get(f"/api/runs/{run_id}")).json()
    cursor = answer["nextStepCursor"]
    while cursor:
        page = await http.get(f"/api/runs/{run_id}/steps?after={cursor}&limit=1000")
        cursor = page.json()["nextCursor"]
    return (time.perf_counter() - began) * 1000


async def bench(url: str, args: argparse.Namespace) -> None:
    world = wayline.open_world(url)
    await world.start()
    try:
        run_id = await long_run(world, args.steps)
        for kept, what in ((0, "a fold per page"), (32, "kept folds")):
            figures, folds = [], 0
            for _ in range(args.repeat):
                app = create_app(wayline.Client(world), world_url=url, kept_folds=kept)
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
                    figures.append(await opening(http, run_id))
                    figures.append(await opening(http, run_id))  # the same page opened again
                folds += app.state.folds.folds
            low, high = min(figures), max(figures)
            print(f"  {what}: {low:.0f}-{high:.0f} ms, {folds} folds", flush=True)
    finally:
        await world.close()


def on_each_world(
    args: argparse.Namespace,
    name: str,
    what: str,
    run: Callable[[str, argparse.Namespace], Coroutine[Any, Any, None]],
) -> None:
    """``run`` on a fresh world of each kind ``--worlds`` names (NATS on a throwaway
    nats-server), with the machine and its load before and after."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    from nats_server import world_url

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {os.getloadavg()}"
    )
    for kind in args.worlds.split(","):
        print(f"{kind}: {what}", flush=True)
        with world_url(kind, name) as url:
            asyncio.run(run(url, args))
    print(f"load average at the end {os.getloadavg()}")


def worlds_parser(doc: str | None, count: str, default: int) -> argparse.ArgumentParser:
    """The options of a bench of the console's API: ``--worlds``, ``--repeat`` and the size
    of the run it reads (``count``)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument(count, type=int, default=default)
    parser.add_argument("--repeat", type=int, default=3)
    return parser


def main() -> None:
    args = worlds_parser(__doc__, "--steps", 5000).parse_args()
    on_each_world(args, "console_steps", f"a run of {args.steps} steps", bench)


if __name__ == "__main__":
    main()
