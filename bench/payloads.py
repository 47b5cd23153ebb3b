"""What a large payload costs: start→result of a one-step run whose input, step argument,
step result and output are each N MiB, on each world, next to the same run with a tiny payload.

    python -P bench/payloads.py [--worlds local,nats] [--sizes 0.25,1,8,32] [--repeat 3]

(``-P``: bench/operator.py would otherwise shadow the standard library's ``operator``.)

Payloads over the inline threshold (``WAYLINE_INLINE_PAYLOAD_BYTES``, 256 KiB) are stored out
of line (a SQLite blob table, a JetStream Object Store bucket), so each N-MiB run writes the
value four times (input, step argument, result, output; all four differ in their stored form
only by the envelope) and reads them back in its replays. Prints the median time per size and
the cost per MiB over the tiny run, and writes the figures into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import write_section

import wayline

MIB = 1024 * 1024
HEADING = "## Payload size: cost per MiB (out-of-line payloads)"


@wayline.step
async def bench_pass(value: str) -> str:
    return value


@wayline.workflow
async def bench_payload(value: str) -> str:
    return await bench_pass(value)


async def one_run(client: wayline.Client, size: int) -> float:
    value = "p" * size
    start = time.perf_counter()
    run = await client.start(bench_payload, value)
    out = await run.result(timeout=600)
    took = time.perf_counter() - start
    assert len(out) == size
    return took


async def bench_world(url: str, sizes: list[float], repeat: int) -> dict[float, float]:
    """Median seconds of a run per size (MiB; 0 is a 1-byte payload)."""
    world = wayline.open_world(url)
    client = wayline.Client(world)
    out: dict[float, float] = {}
    async with world, wayline.Worker(world, [bench_payload]):
        await one_run(client, 1)  # warm up: connections, buckets, tables
        for mib in [0.0, *sizes]:
            size = max(1, int(mib * MIB))
            times = [await one_run(client, size) for _ in range(repeat)]
            out[mib] = statistics.median(times)
            print(f"{url.split(':')[0]:6} {mib:6g} MiB: {out[mib] * 1000:8.1f} ms", flush=True)
    return out


def report(results: dict[str, dict[float, float]], repeat: int) -> list[str]:
    lines = [
        f"| world | payload | start→result (median of {repeat}) | over a tiny payload | per MiB |",
        "| --- | --- | --- | --- | --- |",
    ]
    for kind, figures in results.items():
        base = figures[0.0]
        for mib, took in figures.items():
            extra = took - base
            per = f"{extra / mib * 1000:.1f} ms" if mib else "-"
            shown = f"{mib:g} MiB" if mib else "1 byte"
            lines.append(
                f"| {kind} | {shown} | {took * 1000:.1f} ms | {extra * 1000:+.1f} ms | {per} |"
            )
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--sizes", default="0.25,1,8,32")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    results: dict[str, dict[float, float]] = {}
    with ExitStack() as stack:
        for kind in args.worlds.split(","):
            if kind == "local":
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
                url = f"sqlite:///{tmp}/bench.db"
            elif kind == "nats":
                from nats_server import nats_server

                url = f"{stack.enter_context(nats_server())}?prefix=pay{os.getpid()}"
            else:
                raise SystemExit(f"unknown world {kind!r}")
            results[kind] = await bench_world(url, sizes, args.repeat)
    lines = report(results, args.repeat)
    print("\n".join(lines))
    if not args.no_write:
        note = (
            "Each run moves the payload as input, step argument, step result and output "
            "(four stored copies), with the inline threshold at its default (256 KiB)."
        )
        write_section(HEADING, "bench/payloads.py", lines, note)


if __name__ == "__main__":
    asyncio.run(main())
