"""How long the console's runs page takes server-side among many runs, on each world.

    python bench/console.py [--worlds local,nats] [--runs 100000] [--repeat 3]

Fills a fresh world with ``--runs`` runs of one workflow (one in ten completed, one in twenty
failed, the rest pending; each with a ``tenant`` search attribute of 100 values), written as
``Client.start`` writes a run's ``run_created`` (and, for an ended run, its end in the same
append: no worker runs them, and the queue is not what is measured). Then calls the runs
page's API in-process (the console's ASGI app over httpx, so the figure is the server's work
and not the network's): the first page, a page filtered by status, one filtered by a search
attribute, the counts by status, and a page 20 pages deep reached by its cursor. Each call's
time is min-max over ``--repeat`` calls, after one warming call. On NATS the console keeps the
runs index in memory (``follow_runs``): the calls are timed once it is loaded, and its load
time is printed; before that, the same world's first page and counts are timed as a reader
that does not follow them reads them (the index's names), for a ratio measured in one run.
NATS runs on a throwaway nats-server (``bench/nats_server.py``) with the server's default sync
setting.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
# operator module for every import below: take it off the path first
sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import contextlib
import os
import platform
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

import wayline
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.cli.console import create_app

WORKFLOW = "bench_console"
_CONCURRENT = 200
"""Runs created at once while the world is filled."""


async def fill(world: wayline.World, runs: int) -> float:
    """Create ``runs`` runs; returns the seconds it took."""
    rng = random.Random(11)
    began = time.perf_counter()
    for start in range(0, runs, _CONCURRENT):
        batch = []
        for i in range(start, min(start + _CONCURRENT, runs)):
            data = {
                "workflow": WORKFLOW,
                "input": {"args": [i]},
                "search": {"tenant": f"t{rng.randrange(100)}"},
            }
            events = [NewEvent(EventType.RUN_CREATED, data=data)]
            if i % 10 == 0:
                events.append(NewEvent(EventType.RUN_COMPLETED, data={"output": i}))
            elif i % 20 == 1:
                error = {"type": "BenchError", "message": "failed on purpose"}
                events.append(NewEvent(EventType.RUN_FAILED, data={"error": error}))
            batch.append(world.append(new_run_id(), events, expected_seq=0))
        await asyncio.gather(*batch)
    flush = getattr(world, "flush_runs_index", None)
    if flush is not None:  # NATS: the runs index is written off the appends' path
        assert await flush(3600.0), "the runs index's writer did not catch up"
    return time.perf_counter() - began


async def fill_url(url: str, runs: int) -> None:
    """Open the world at ``url``, create ``runs`` runs in it (``fill``) and say how long it took."""
    world = wayline.open_world(url)
    await world.start()
    try:
        print(f"  filled {runs} runs in {await fill(world, runs):.1f} s", flush=True)
    finally:
        await world.close()


@contextlib.asynccontextmanager
async def console_at(url: str) -> AsyncIterator[tuple[wayline.World, httpx.AsyncClient]]:
    """A fresh world at ``url`` (a console process starting now) and the console's API over
    it, called in-process (the server's work, not the network's); an error is answered, not
    raised, and a call may take up to 600 s."""
    world = wayline.open_world(url)
    await world.start()
    try:
        app = create_app(wayline.Client(world), world_url=url)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600
        ) as http:
            yield world, http
    finally:
        await world.close()


async def timed(call: Callable[[], Awaitable[httpx.Response]], repeat: int) -> list[float]:
    answer = await call()  # warm: connections, caches, pages
    assert answer.status_code == 200, answer.text
    out = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = await call()
        out.append((time.perf_counter() - began) * 1000)
        assert answer.status_code == 200, answer.text
    return out


async def timed_calls(call: Callable[[], Awaitable[None]], repeat: int) -> list[float]:
    await call()  # warm
    out = []
    for _ in range(repeat):
        began = time.perf_counter()
        await call()
        out.append((time.perf_counter() - began) * 1000)
    return out


async def deep_cursor(http: httpx.AsyncClient, pages: int) -> str:
    cursor = ""
    for _ in range(pages):
        params = {"limit": "50", **({"cursor": cursor} if cursor else {})}
        cursor = (await http.get("/api/runs", params=params)).json()["nextCursor"]
        assert cursor, "fewer runs than pages asked for"
    return cursor


async def bench(url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    world = wayline.open_world(url)
    await world.start()
    try:
        filled = await fill(world, args.runs)
        print(f"  filled {args.runs} runs in {filled:.1f} s", flush=True)
        figures: dict[str, list[float]] = {}
        if hasattr(world, "runs_followed"):
            # NATS, before the console follows the runs: the same world's first page and
            # counts read from the index's names, as every reader did before the read model
            async def names_page() -> None:
                await world.runs_page(after=None, limit=51)
                await world.count_runs()

            figures["first page and counts, from the names"] = await timed_calls(
                names_page, args.repeat
            )
            low, high = (
                min(figures["first page and counts, from the names"]),
                max(figures["first page and counts, from the names"]),
            )
            print(f"  first page and counts, from the names: {low:.1f}-{high:.1f} ms", flush=True)
        app = create_app(wayline.Client(world), world_url=url)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            began = time.perf_counter()
            answer = await http.get("/api/runs")  # the console starts following
            assert answer.status_code == 200, answer.text
            first = answer.json()
            print(f"  counts {first['counts']} ({time.perf_counter() - began:.1f} s)", flush=True)
            followed = getattr(world, "runs_followed", None)
            if followed is not None:  # NATS: the runs index loaded in memory (runs_model)
                model = await followed(600.0)
                assert model is not None, "the runs index was not loaded in memory"
                print(
                    f"  runs index in memory: {len(model.runs)} runs loaded in "
                    f"{model.load_seconds:.2f} s",
                    flush=True,
                )
            cursor = await deep_cursor(http, 20)
            calls: dict[str, Callable[[], Awaitable[httpx.Response]]] = {
                "first page": lambda: http.get("/api/runs"),
                "by status (failed)": lambda: http.get("/api/runs?status=failed"),
                "by attribute (tenant=t7)": lambda: http.get("/api/runs?where=tenant%3Dt7"),
                "counts by status": lambda: http.get("/api/runs?limit=1"),
                "page 21 by cursor": lambda: http.get(f"/api/runs?cursor={cursor}"),
            }
            for name, call in calls.items():
                figures[name] = await timed(call, args.repeat)
                low, high = min(figures[name]), max(figures[name])
                print(f"  {name}: {low:.1f}-{high:.1f} ms", flush=True)
            return figures
    finally:
        await world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nats_server import world_url

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {os.getloadavg()}"
    )
    for kind in args.worlds.split(","):
        print(f"{kind}: {args.runs} runs", flush=True)
        with world_url(kind, "console") as url:
            figures = asyncio.run(bench(url, args))
        for name, values in figures.items():
            print(f"{kind} {name} (ms): {min(values):.1f}-{max(values):.1f}")
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
