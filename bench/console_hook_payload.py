"""What the console's run JSON costs for a run whose hook was resumed with a large payload, or
(``--payloads N``) with N small ones: the size of ``GET /api/runs/{id}``'s body, the peak of
Python allocations while it is made (tracemalloc) and how long it takes, on each world.

    python bench/console_hook_payload.py [--worlds local,nats] [--mib 12] [--repeat 3]
    python bench/console_hook_payload.py --payloads 5000 [--worlds local,nats] [--repeat 3]

With ``--payloads`` the worker stops once the hook is made and the N payloads
(``{"n": i, "text": 200 characters}``, some 230 bytes of JSON each) are appended to the run's
log as ``resume_hook`` writes them, 250 to an append (a resume reads the run's log, so 5,000 of
them one by one would take minutes); the console folds the log as stored either way.

Writes one run waiting on a hook, resumes it with ``{"text": "x" * N}`` (N = ``--mib`` MiB,
stored in a blob), then reads the run ``--repeat`` times in-process (the console's ASGI app
over httpx), each by a console made afresh. Run it with the code under test on the path (an
older checkout's ``runtime`` first on ``PYTHONPATH`` measures that version). NATS runs on a
throwaway nats-server (``bench/nats_server.py``).
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)
from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import os
import platform
import time
import tracemalloc

import httpx

import wayline
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app

MIB = 1024 * 1024


@wayline.workflow(name="bench_console_hook_payload")
async def answered() -> int:
    payload = await wayline.create_hook("bench_console_hook_payload")
    return len(payload["text"])


async def waiting(
    client: wayline.Client, workflow: wayline.WorkflowDefinition[[], int], hook: str
) -> wayline.RunHandle[int]:
    """A run of ``workflow`` started, once it waits on its hook ``hook``."""
    run = await client.start(workflow)
    await client.wait_for_hook(hook, timeout=30)
    return run


async def bench(url: str, args: argparse.Namespace) -> None:
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        async with wayline.Worker(world, [answered]):
            run = await waiting(client, answered, "bench_console_hook_payload")
            size = int(args.mib * MIB)
            await client.resume_hook("bench_console_hook_payload", {"text": "x" * size})
            assert await run.result(timeout=120) == size
        await measure(client, url, run.run_id, args)


@wayline.workflow(name="bench_console_hook_payloads")
async def followed() -> int:
    seen = 0
    async for _ in wayline.create_hook("bench_console_hook_payloads"):
        seen += 1
    return seen


async def bench_many(url: str, args: argparse.Namespace) -> None:
    """A hook of ``args.payloads`` small payloads, its run read ``args.repeat`` times."""
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        async with wayline.Worker(world, [followed]):
            run = await waiting(client, followed, "bench_console_hook_payloads")
        hook = await world.get_hook("bench_console_hook_payloads")
        assert hook is not None
        for start in range(0, args.payloads, 250):
            data = [{"payload": {"n": n, "text": "y" * 200}} for n in range(start, start + 250)]
            batch = [NewEvent(EventType.HOOK_RECEIVED, hook.correlation_id, d) for d in data]
            await world.append(run.run_id, batch[: args.payloads - start])
        await measure(client, url, run.run_id, args)
        await walk(client, url, run.run_id, args)


async def walk(client: wayline.Client, url: str, run_id: str, args: argparse.Namespace) -> None:
    """Walks every payload through ``/hooks/{hook}/payloads``, 1,000 a page, ``args.repeat``
    times, each by a console made afresh after it read the run (which folds the log: the
    pages reuse that fold), timed from the first page to the last. Code older than the
    endpoint carries every payload in the run's JSON: skipped."""
    took, pages = [], 0
    for _ in range(args.repeat):
        app = create_app(client, world_url=url)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
            (hook,) = (await http.get(f"/api/runs/{run_id}")).json()["hooks"]
            if "payloadCount" not in hook:
                return
            began, cursor, pages, seen = time.perf_counter(), "0", 0, 0
            while cursor is not None:
                got = await http.get(
                    f"/api/runs/{run_id}/hooks/{hook['id']}/payloads",
                    params={"after": cursor, "limit": 1000},
                )
                page = got.json()
                seen, cursor, pages = seen + len(page["payloads"]), page["nextCursor"], pages + 1
            took.append((time.perf_counter() - began) * 1000)
            assert seen == hook["payloadCount"], (seen, hook["payloadCount"])
    print(f"  every payload in {pages} pages: {min(took):.0f}-{max(took):.0f} ms", flush=True)


async def measure(client: wayline.Client, url: str, run_id: str, args: argparse.Namespace) -> None:
    """Reads the run ``args.repeat`` times, each by a console made afresh (its fold not kept):
    timed with tracemalloc off, then once more with it on for the peak of allocations."""
    peaks, took, body = [], [], 0
    for _ in range(args.repeat):
        for traced in (False, True):
            app = create_app(client, world_url=url)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
                if traced:
                    tracemalloc.start()
                began = time.perf_counter()
                answer = await http.get(f"/api/runs/{run_id}")
                if traced:
                    peaks.append(tracemalloc.get_traced_memory()[1] / MIB)
                    tracemalloc.stop()
                else:
                    took.append((time.perf_counter() - began) * 1000)
                assert answer.status_code == 200, answer.text[:200]
                body = len(answer.content)
    print(
        f"  body {body / 1024:.1f} KiB; served in {min(took):.0f}-{max(took):.0f} ms; "
        f"peak {min(peaks):.2f}-{max(peaks):.2f} MiB (tracemalloc on, a read of its own)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--mib", type=float, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--payloads", type=int, default=0, help="N small payloads instead")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nats_server import world_url

    machine = platform.processor() or platform.machine()
    print(f"{machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"wayline from {os.path.dirname(wayline.__file__)}; load {os.getloadavg()}")
    for kind in args.worlds.split(","):
        with world_url(kind, "console_hook_payload") as url:
            if args.payloads:
                print(f"{kind}: a hook resumed {args.payloads} times", flush=True)
                asyncio.run(bench_many(url, args))
            else:
                print(f"{kind}: a hook resumed with {args.mib} MiB", flush=True)
                asyncio.run(bench(url, args))
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
