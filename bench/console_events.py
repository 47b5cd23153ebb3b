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

With ``--archived`` the run is archived (``wayline archive``) once written, and each round
reads, alternating, the first page and a full walk as ``/events`` read an archived run at
4dd03e5 (the archive's whole copy read by ``World.archived_run`` and sliced, each page; that
handler mounted at ``/old-pages/{run_id}``) and as it reads one now (``World.archived_page``,
issue #37).
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
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app
from wayline.cli.console.api import Reply
from wayline.cli.console.event_pages import archived_page, events_json

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


def old_archived_pages(client: wayline.Client) -> Callable[[Request], Awaitable[Response]]:
    """``GET /api/runs/{id}/events?after=&limit=`` of an archived run as it was at 4dd03e5:
    the archive's whole copy read (``archived_run``) and sliced, for every page."""

    async def handler(request: Request) -> Response:
        world, run_id = client.world, request.path_params["run_id"]
        after = int(request.query_params.get("after") or 0)
        limit = int(request.query_params.get("limit") or 1000)
        found = await world.archived_run(run_id)
        assert found is not None
        info, log = found
        stored = [e for e in log if e.seq > after][:limit]
        return Reply(events_json(await archived_page(world, run_id, stored), info.last_seq))

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
        if args.archived:
            await world.append(run_id, [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})])
            assert await world.archive_runs(older_than=0) == 1
        client = wayline.Client(world)
        app = create_app(client, world_url=url)
        app.router.routes.append(Route("/old/{run_id}", old_events(client)))
        app.router.routes.append(Route("/old-pages/{run_id}", old_archived_pages(client)))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:

            async def whole() -> int:
                got = await http.get(f"/old/{run_id}")
                assert got.status_code == 200 and got.json()["events"][-1]["seq"] > 0
                return len(got.content)

            async def first(path: str = f"/api/runs/{run_id}/events") -> int:
                got = await http.get(path)
                assert got.status_code == 200, got.text[:200]
                return len(got.content)

            async def walk(path: str = f"/api/runs/{run_id}/events") -> int:
                size, cursor, seen = 0, "0", 0
                while cursor is not None:
                    got = await http.get(path, params={"after": cursor, "limit": 1000})
                    page = got.json()
                    size += len(got.content)
                    seen += len(page["events"])
                    cursor = page["nextCursor"]
                assert seen == page["eventCount"], (seen, page["eventCount"])
                return size

            figures: dict[str, list[tuple[float, int]]] = {}
            old = f"/old-pages/{run_id}"
            reads: dict[str, Callable[[], Awaitable[int]]] = (
                {
                    "old first": lambda: first(old),
                    "first": first,
                    "old walk": lambda: walk(old),
                    "walk": walk,
                }
                if args.archived
                else {"whole": whole, "first": first, "walk": walk}
            )
            for _ in range(args.repeat):  # alternating, so that a load spike hits each alike
                for what, read in reads.items():
                    figures.setdefault(what, []).append(await timed(read))
        found = await world.archived_run(run_id) if args.archived else None
        count = found[0].last_seq if found else (await world.get_run(run_id)).last_seq  # type: ignore[union-attr]
        print(f"  {count} events", flush=True)
        for what, rows in figures.items():
            ms = [m for m, _ in rows]
            size = rows[0][1]
            print(f"  {what}: {min(ms):.0f}-{max(ms):.0f} ms, {size:,} bytes", flush=True)
    finally:
        await world.close()


def main() -> None:
    parser = worlds_parser(__doc__, "--events", 50_000)
    parser.add_argument("--archived", action="store_true", help="archive the run, then read it")
    args = parser.parse_args()
    what = f"{'an archived' if args.archived else 'a'} run of about {args.events} events"
    on_each_world(args, "console_events", what, bench)


if __name__ == "__main__":
    main()
