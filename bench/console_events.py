"""How long the console's API takes to hand over a run's events, and how many bytes, paged
(``/events?after=&limit=``) and as the whole log in one response (the call before the pages),
on each world.

    python bench/console_events.py [--worlds local,nats] [--events 50000] [--repeat 3]

Writes one run of about ``--events`` events to a fresh world (created, started, then steps of
three events each, in appends of 500 steps, as bench/console_steps.py does), then reads it
in-process (the console's ASGI app over httpx), alternating: the whole log in one response,
as ``GET /api/runs/{id}/events`` did before the pages (the old handler, mounted on the same app
at ``/old/{run_id}``); the first page (``/events`` with no parameters); and a full walk of
every page, 1,000 events at a time. Each figure is min-max over ``--repeat`` rounds. NATS runs
on a throwaway nats-server (``bench/nats_server.py``).
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
# operator module for every import below: take it off the path first
sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import os
import time
from collections.abc import Awaitable, Callable

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import wayline
from wayline.cli.console import create_app
from wayline.cli.console.api import Reply

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console_steps import long_run, on_each_world, worlds_parser

BATCH = 500


def old_events(client: wayline.Client) -> Callable[[Request], Awaitable[Response]]:
    """``GET /api/runs/{id}/events`` as it was before the pages (at 337bb92)."""

    async def handler(request: Request) -> Response:
        info = await client.get_run(await client.resolve(request.path_params["run_id"]))
        events = await client.handle(info.run_id).events()
        return Reply({"events": [e.to_json() for e in events]})

    return handler


async def timed(read: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    began = time.perf_counter()
    size = await read()
    return (time.perf_counter() - began) * 1000, size


async def bench(url: str, args: argparse.Namespace) -> None:
    world = wayline.open_world(url)
    await world.start()
    try:
        # created and started, then three events a step
        run_id = await long_run(world, max(0, args.events - 2) // 3)
        client = wayline.Client(world)
        app = create_app(client, world_url=url)
        app.router.routes.append(Route("/old/{run_id}", old_events(client)))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:

            async def whole() -> int:
                got = await http.get(f"/old/{run_id}")
                assert got.status_code == 200 and got.json()["events"][-1]["seq"] > 0
                return len(got.content)

            async def first() -> int:
                got = await http.get(f"/api/runs/{run_id}/events")
                assert got.status_code == 200, got.text[:200]
                return len(got.content)

            async def walk() -> int:
                size, cursor, seen = 0, "0", 0
                while cursor is not None:
                    got = await http.get(
                        f"/api/runs/{run_id}/events", params={"after": cursor, "limit": 1000}
                    )
                    page = got.json()
                    size += len(got.content)
                    seen += len(page["events"])
                    cursor = page["nextCursor"]
                assert seen == page["eventCount"], (seen, page["eventCount"])
                return size

            figures: dict[str, list[tuple[float, int]]] = {"whole": [], "first": [], "walk": []}
            for _ in range(args.repeat):  # alternating, so that a load spike hits each alike
                figures["whole"].append(await timed(whole))
                figures["first"].append(await timed(first))
                figures["walk"].append(await timed(walk))
        count = (await world.get_run(run_id)).last_seq  # type: ignore[union-attr]
        print(f"  {count} events", flush=True)
        for what, rows in figures.items():
            ms = [m for m, _ in rows]
            size = rows[0][1]
            print(f"  {what}: {min(ms):.0f}-{max(ms):.0f} ms, {size:,} bytes", flush=True)
    finally:
        await world.close()


def main() -> None:
    args = worlds_parser(__doc__, "--events", 50_000).parse_args()
    on_each_world(args, "console_events", f"a run of about {args.events} events", bench)


if __name__ == "__main__":
    main()
