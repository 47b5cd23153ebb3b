"""A NATS console's first runs call right after it starts, its runs model's load, and its
calls once loaded, at two versions of the runtime on one filled world, alternating.

    python bench/console_start.py [--runs 100000] [--rounds 3] [--old DIR] [--keep DIR]

Fills one throwaway nats-server's world with ``--runs`` runs (as bench/console.py does), then,
``--rounds`` times, for the runtime under ``--old`` (a copy of another commit's ``runtime``
folder, e.g. ``git archive 7c0454c runtime | tar -x -C /tmp/old``) and this worktree's,
alternating, starts a fresh process (a console starting now: nothing in memory), which opens
the world and the console's app and times its first ``GET /api/runs`` (a page of 50 and the
counts by status), then waits for the runs model's load and times the loaded calls (the first
page, ``status=failed``, the counts alone) min-max over three after a warming one. Each
process prints one JSON line; the parent prints them with the machine's load average.
``--keep DIR`` keeps the server's store in ``DIR``: a later run with the same folder and
``--runs`` serves the filled world again instead of filling one (four to seven minutes at
100,000 runs on a shared machine); ``--rounds 0`` only fills it.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_ms(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used, in milliseconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def measure(url: str, server: int) -> dict[str, Any]:
    """One console process's first call, its model's load and its loaded calls. The first
    call's CPU time, this process's and the server's (pid ``server``), says what it costs
    whatever else the machine runs; its wall time is that cost stretched by the machine's
    load."""
    import wayline
    from console import console_at

    async with console_at(url) as (world, http):
        server_before, own_before = cpu_ms(server), time.process_time()
        began = time.perf_counter()
        first = await http.get("/api/runs")
        first_ms = (time.perf_counter() - began) * 1000
        own_cpu = (time.process_time() - own_before) * 1000
        server_cpu = cpu_ms(server) - server_before
        if first.status_code != 200:
            return {"first call": first.status_code, "error": first.text[:160]}
        body = first.json()
        failed_loads = 0
        while (model := await world.runs_followed(600.0)) is None:  # type: ignore[attr-defined]
            # the load failed (a direct get timed out on a busy server): a read starts it
            failed_loads += 1
            assert failed_loads < 5, "the runs model did not load in 5 tries"
            assert (await http.get("/api/runs")).status_code == 200
        loaded_s = time.perf_counter() - began
        loaded = (await http.get("/api/runs")).json()
        calls = {
            "first page": "/api/runs",
            "status=failed": "/api/runs?status=failed",
            "counts (limit=1)": "/api/runs?limit=1",
        }
        figures: dict[str, Any] = {}
        for name, path in calls.items():
            assert (await http.get(path)).status_code == 200  # warm
            times = []
            for _ in range(3):
                began_call = time.perf_counter()
                answer = await http.get(path)
                times.append((time.perf_counter() - began_call) * 1000)
                assert answer.status_code == 200, answer.text
            figures[name] = f"{min(times):.1f}-{max(times):.1f} ms"
        return {
            "runtime": os.path.dirname(os.path.dirname(wayline.__file__)),
            "first call ms": round(first_ms, 1),
            "its CPU ms (console, server)": [round(own_cpu), round(server_cpu)],
            "first counts partial": body.get("countsPartial"),
            "first counts equal loaded": body["counts"] == loaded["counts"],
            "first page equal loaded": body["runs"] == loaded["runs"],
            "model load s": round(model.load_seconds or 0.0, 2),
            "failed loads": failed_loads,
            "loaded after first call began s": round(loaded_s, 2),
            "loaded calls": figures,
        }


async def fill(url: str, runs: int) -> None:
    from console import fill_url

    await fill_url(url, runs)


@contextlib.contextmanager
def kept_world(keep: str | None, runs: int) -> Iterator[tuple[str, int]]:
    """A world's URL holding ``runs`` runs on a nats-server whose store is ``keep`` (a
    throwaway one for None), and the server's pid. A folder an earlier run filled with as
    many runs is served again; otherwise the world is filled now (``fill``)."""
    from nats_server import nats_server_process

    filled: dict[str, Any] = {}
    if keep and os.path.exists(os.path.join(keep, "world.json")):
        with open(os.path.join(keep, "world.json")) as f:
            filled = json.load(f)
    if filled.get("runs") != runs:
        filled = {}
    prefix = filled.get("prefix") or f"c{uuid.uuid4().hex[:8]}"
    with nats_server_process(keep=keep) as (base, pid):
        url = f"{base}?prefix={prefix}"
        if not filled:
            asyncio.run(fill(url, runs))
            if keep:
                with open(os.path.join(keep, "world.json"), "w") as f:
                    json.dump({"runs": runs, "prefix": prefix}, f)
        yield url, pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="another commit's runtime folder, measured alternately")
    parser.add_argument(
        "--keep",
        help="a folder for the server's store, kept: a later run with the same folder and"
        " --runs reuses the filled world instead of filling one again",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a child: the world's URL
    parser.add_argument("--server", type=int, help=argparse.SUPPRESS)  # and the server's pid
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    if args.measure:
        print(json.dumps(asyncio.run(measure(args.measure, args.server))), flush=True)
        return
    from nats_server import machine

    print(machine(), flush=True)
    runtimes = [os.path.join(os.path.dirname(HERE), "runtime")]
    if args.old:
        runtimes.insert(0, os.path.abspath(args.old))
    with kept_world(args.keep, args.runs) as (url, server):
        for i in range(args.rounds):
            for runtime in runtimes:
                env = {**os.environ, "PYTHONPATH": runtime}
                done = subprocess.run(
                    [
                        sys.executable,
                        os.path.abspath(__file__),
                        "--measure",
                        url,
                        "--server",
                        str(server),
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                line = done.stdout.strip().splitlines()[-1:] or [done.stderr[-400:]]
                print(f"round {i + 1}, {runtime}: {line[0]}; load {os.getloadavg()}", flush=True)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
