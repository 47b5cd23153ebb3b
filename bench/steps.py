"""Per-step latency and throughput on each world. Prints figures and writes bench/RESULTS.md.

    python bench/steps.py [--worlds local,nats] [--sizes 10,100,1000] [--runs 100]

Per-step latency is the gap between consecutive ``step_completed`` events of one run of N
no-op inline steps, read from the world's own timestamps (so client polling never counts).
Throughput is total steps / wall time for R concurrent runs of 10 steps, started and awaited
at once (median of 3). For NATS the floor is measured in the same process: the median round
trip of one acknowledged JetStream publish.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

import wayline
from wayline._core.events import EventType

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


@wayline.step
async def bench_noop(i: int) -> int:
    return i


@wayline.workflow
async def bench_chain(n: int) -> int:
    for i in range(n):
        await bench_noop(i)
    return n


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def per_step(world: wayline.World, n: int) -> dict[str, float]:
    client = wayline.Client(world)
    handle = await client.start(bench_chain, n)
    await handle.result(timeout=600)
    stamps = [e.created_at for e in await handle.events() if e.type is EventType.STEP_COMPLETED]
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]
    return {"p50": statistics.median(gaps), "p95": pct(gaps, 0.95), "mean": statistics.mean(gaps)}


async def throughput(world: wayline.World, runs: int, steps: int = 10) -> float:
    """R runs started at once and awaited at once, as R concurrent callers would: total steps
    over the wall time until the last result is in the client's hands."""
    client = wayline.Client(world)
    start = time.perf_counter()
    handles = await asyncio.gather(*(client.start(bench_chain, steps) for _ in range(runs)))
    await asyncio.gather(*(h.result(timeout=600) for h in handles))
    return runs * steps / (time.perf_counter() - start)


async def publish_floor(url: str, samples: int = 2000) -> float:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="BENCHFLOOR", subjects=["benchfloor.>"])
    for _ in range(200):
        await js.publish("benchfloor.x", b"x" * 128)
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        await js.publish("benchfloor.x", b"x" * 128)
        times.append((time.perf_counter() - t) * 1000)
    await js.delete_stream("BENCHFLOOR")
    await nc.close()
    return statistics.median(times)


async def bench_world(kind: str, url: str, sizes: list[int], runs: int) -> dict[str, Any]:
    world = wayline.open_world(url)
    out: dict[str, Any] = {"kind": kind, "sizes": {}}
    async with world, wayline.Worker(world, [bench_chain]):
        await per_step(world, 10)  # warm up
        for n in sizes:
            tries = [await per_step(world, n) for _ in range(3)]  # the median try, by p50
            out["sizes"][n] = sorted(tries, key=lambda t: t["p50"])[1]
            s = out["sizes"][n]
            print(f"{kind:5} N={n:<5} per step p50 {s['p50']:.3f} ms  p95 {s['p95']:.3f} ms")
        await throughput(world, runs)  # warm up
        out["throughput"] = statistics.median([await throughput(world, runs) for _ in range(3)])
        print(f"{kind:5} {runs} concurrent runs x 10 steps: {out['throughput']:.0f} steps/s")
    if kind == "nats":
        out["floor"] = await publish_floor(url)
        print(f"nats  floor: median acknowledged publish {out['floor']:.3f} ms")
    return out


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()}"


def write_results(results: list[dict[str, Any]], sizes: list[int], runs: int) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `bench/steps.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"Machine: {machine()}.",
        "",
        "Per-step latency: gaps between consecutive `step_completed` stamps of one run of N "
        "no-op inline steps (world time), the median of 3 runs. Throughput: 100 concurrent "
        "runs of 10 steps, started and awaited at once, one worker process (median of 3).",
        "",
        "| world | "
        + " | ".join(f"N={n} p50 / p95 (ms)" for n in sizes)
        + f" | {runs} runs (steps/s) | floor (ms) | p50 / floor |",
        "|---|" + "---|" * (len(sizes) + 3),
    ]
    for r in results:
        cells = [f"{r['sizes'][n]['p50']:.3f} / {r['sizes'][n]['p95']:.3f}" for n in sizes]
        floor = r.get("floor")
        ratio = f"{r['sizes'][sizes[-1]]['p50'] / floor:.2f}x" if floor else "-"
        lines.append(
            f"| {r['kind']} | "
            + " | ".join(cells)
            + f" | {r['throughput']:.0f} | {f'{floor:.3f}' if floor else '-'} | {ratio} |"
        )
    first, last = sizes[0], sizes[-1]
    lines += [
        "",
        "Growth with run length (p50 at N={} / N={}): {}.".format(
            last,
            first,
            ", ".join(
                f"{r['kind']} {r['sizes'][last]['p50'] / r['sizes'][first]['p50']:.2f}x"
                for r in results
            ),
        ),
    ]
    lines += [
        "",
        "Anchors measured elsewhere on a 2-core machine, each with its default store: Restate "
        "5.5 ms/step, bunqueue 5.1 ms, DBOS on SQLite 7.0 ms, Temporal 13.9 ms (local "
        "activities), the reference TypeScript runtime's local world 67 ms (growing with run "
        "length); Restate reached 924 steps/s with 100 concurrent runs.",
        "",
    ]
    old = RESULTS.read_text() if RESULTS.exists() else ""
    kept = old[old.find("\n## ") + 1 :] if "\n## " in old else ""  # other benches' sections
    RESULTS.write_text("\n".join(lines) + ("\n" + kept if kept else ""))
    print(f"wrote {RESULTS}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with ExitStack() as stack:
        for kind in args.worlds.split(","):
            if kind == "local":
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
                url = f"sqlite:///{tmp}/bench.db"
            elif kind == "nats":
                from nats_server import nats_server

                url = stack.enter_context(nats_server())
            else:
                raise SystemExit(f"unknown world {kind!r}")
            results.append(await bench_world(kind, url, sizes, args.runs))
    write_results(results, sizes, args.runs)


if __name__ == "__main__":
    asyncio.run(main())
