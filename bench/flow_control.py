"""Flow control on NATS: the rate a ``RateLimit(rate="100/s")`` step achieves across 3 worker
processes sharing one bucket.

    python bench/flow_control.py [--rate 100/s] [--window 60] [--repeat 3] [--runs 200] [--write]

``--rate`` far above what the workers can serve (``100000/s``) measures their own pace: a
limit above it cannot be reached on that machine, whatever the bucket does.

Each round starts ``runs`` runs of one workflow that calls the rate-limited step ``steps``
times in sequence (so ``runs`` steps wait on the bucket at any moment, more than its rate
can serve), in 3 ``wayline worker`` processes, on a fresh bucket key. Every body returns the
time it started; the achieved rate is the number of starts in ``window`` seconds, counted
from ``warmup`` seconds after the first start (the bucket starts full: its first second's
burst is left out), divided by the window. The figure is min-max over the rounds.
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import flow_control_flows as flows
from nats_server import nats_server
from results import RESULTS, write_section
from steps import worker_processes

import wayline
from wayline._core.rate_limits import parse_rate

FLOWS = HERE / "flow_control_flows.py"
PROCESSES = 3


async def one_round(url: str, window: float, warmup: float, runs: int, target: float) -> float:
    # enough steps to keep every run waiting past the window, at most 14 a run (enough for a
    # 100/s limit over 20 s at 200 runs; a limit far above what the workers can serve then
    # measures their own pace without a round of many minutes)
    steps = min(14, int((window + warmup + 5) * target / runs) + 1)
    tag = uuid.uuid4().hex[:8]
    world = wayline.open_world(url)
    async with world:
        client = wayline.Client(world)
        handles = await asyncio.gather(
            *(client.start(flows.chain, tag, steps) for _ in range(runs))
        )
        results = await asyncio.gather(*(h.result(timeout=600) for h in handles))
    starts = sorted(at for times in results for at in times)
    begin = starts[0] + warmup
    counted = sum(1 for at in starts if begin <= at < begin + window)
    return counted / window


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=60.0, help="seconds counted")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds left out first")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=200, help="runs at once (waiting steps)")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument(
        "--debounce", action="store_true", help="measure debounce (1,000 starts in 10 s) instead"
    )
    parser.add_argument(
        "--rate", default="100/s", help="the limit (a high one measures the workers' own pace)"
    )
    args = parser.parse_args()
    os.environ["WAYLINE_BENCH_RATE"] = args.rate  # the worker processes import it
    if args.debounce:
        await debounce_main(args.repeat, args.write)
        return
    target = parse_rate(args.rate)
    rates: list[float] = []
    with served("flowctl") as url:
        for rep in range(args.repeat):
            rate = await one_round(url, args.window, args.warmup, args.runs, target)
            rates.append(rate)
            print(f"[{rep + 1}/{args.repeat}] achieved {rate:.2f}/s", flush=True)
    low, high = min(rates), max(rates)
    within = all(abs(r - target) <= 0.05 * target for r in rates)
    print(f"{args.rate} limit, {PROCESSES} worker processes: {low:.2f}-{high:.2f}/s")
    print(f"within ±5% of the limit in every round: {'yes' if within else 'no'}")
    if args.write:
        write_row(
            f'| `RateLimit(rate="{args.rate}")` step, {PROCESSES} worker processes on NATS, '
            f"{args.runs} runs waiting at once, {args.window:g} s counted after "
            f"{args.warmup:g} s, {args.repeat} round(s) | {low:.2f}-{high:.2f} | "
            f"{'yes' if within else 'no'} |"
        )


async def debounce_round(url: str, starts: int, seconds: float) -> tuple[int, bool]:
    """``starts`` starts of one debounced key spread over ``seconds`` from 4 clients (each its
    own connection): how many runs they made, and whether the one run ran the last input."""
    tag = uuid.uuid4().hex[:8]
    worlds = [wayline.open_world(url) for _ in range(4)]
    for world in worlds:
        await world.start()
    try:
        clients = [wayline.Client(w) for w in worlds]
        loop = asyncio.get_running_loop()
        begin = loop.time()
        handles = []
        for i in range(starts):
            await asyncio.sleep(max(0.0, begin + seconds * i / starts - loop.time()))
            handles.append(await clients[i % 4].start(flows.debounced, tag, i))
        runs = {h.run_id for h in handles}
        result = await handles[-1].result(timeout=120)
    finally:
        for world in worlds:
            await world.close()
    return len(runs), result == starts - 1


@contextlib.contextmanager
def served(prefix: str) -> Iterator[str]:
    """A throwaway nats-server and the world URL that ``PROCESSES`` worker processes serve."""
    with nats_server() as base, tempfile.TemporaryDirectory() as tmp:
        url = f"{base}?prefix={prefix}{os.getpid()}"
        with worker_processes(url, PROCESSES, Path(tmp) / "workers.log", app=FLOWS):
            yield url


HEADING = "## Flow control: rate limits and debounce across worker processes"


async def debounce_main(repeat: int, write: bool) -> None:
    counts: list[int] = []
    last_inputs: list[bool] = []
    with served("debounce") as url:
        for rep in range(repeat):
            runs, last = await debounce_round(url, 1000, 10.0)
            counts.append(runs)
            last_inputs.append(last)
            print(f"[{rep + 1}/{repeat}] 1000 starts in 10 s: {runs} run(s)", flush=True)
    row = (
        f'| `Debounce(period="2s")`: 1,000 starts of one key in 10 s from 4 clients, '
        f"{PROCESSES} worker processes on NATS, {repeat} round(s) (runs made) | "
        f"{min(counts)}-{max(counts)} | {'yes' if all(last_inputs) else 'no'} |"
    )
    print(row)
    if write:
        write_row(row)


def write_row(row: str) -> None:
    """Add a row to this bench's table in RESULTS.md (each invocation measures one limit)."""
    text = RESULTS.read_text()
    start = text.find(HEADING)
    rows = []
    if start >= 0:
        end = text.find("\n## ", start + len(HEADING))
        rows = [
            line
            for line in text[start : end if end >= 0 else len(text)].splitlines()
            if line.startswith(("| `RateLimit", "| `Debounce"))
        ]
    write_section(
        HEADING,
        "`bench/flow_control.py`",
        [
            "| figure | min-max | within ±5% of the limit (a rate); ran the last input "
            "(debounce) |",
            "|---|---|---|",
            *[r for r in rows if r.split("|")[1] != row.split("|")[1]],
            row,
        ],
    )


if __name__ == "__main__":
    asyncio.run(main())
