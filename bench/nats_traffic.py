"""What a world's partitions add to a three-node NATS cluster's traffic: the messages per step
by kind during a wave, and what an idle worker costs a second (docs/nats.md, "How throughput
grows with nodes and partitions").

    python bench/nats_traffic.py [--partitions 1,3] [--runs 1000] [--steps 10] [--rounds 2]
        [--idle 20] [--sync lazy] [--write]

A count, not a timing: on one cluster of ``bench/nats_cluster.py`` (three nats-server nodes
on loopback, stopped by pid when it ends), per partition count in turn, a core NATS subscriber
on ``>`` counts every message the cluster carries (``nats_cluster.message_kind``) while a wave
of R runs of S no-op steps runs to its end, and then while one worker process serves a fresh
world with nothing to do for ``--idle`` seconds; the servers' and the worker's CPU over the
idle time come from ``/proc``. The subscriber adds to what the servers deliver, so the CPU
figures of ``bench/nats_cluster.py`` are the ones to use for a wave. ``--write`` replaces this
bench's section of ``bench/RESULTS.md``.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import collections
import contextlib
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import nats_cluster as nc_bench

HEADING = "## NATS partitions: messages per step and an idle worker"


class Counter:
    """Every message on the cluster while it listens, by ``message_kind``."""

    def __init__(self, urls: list[str], prefix: str) -> None:
        self.urls, self.prefix = urls, prefix
        self.counts: collections.Counter[str] = collections.Counter()
        self.nc: Any = None

    async def __aenter__(self) -> Counter:
        import nats

        self.nc = await nats.connect(servers=self.urls)

        async def seen(msg: Any) -> None:
            self.counts[nc_bench.message_kind(msg.subject, self.prefix)] += 1

        await self.nc.subscribe(">", cb=seen)
        await self.nc.flush()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.nc.flush()
        await asyncio.sleep(0.5)  # what was on its way when the listening ended
        await self.nc.close()


async def drop(cluster: nc_bench.Servers, prefix: str) -> None:
    """Delete every stream of a world: each is a Raft group the nodes keep beating for."""
    import nats

    nc = await nats.connect(servers=cluster.urls)
    try:
        await nc_bench.delete_streams(nc, list(await nc_bench.stream_states(nc, prefix)))
    finally:
        await nc.close()


async def one(
    cluster: nc_bench.Servers, partitions: int, args: argparse.Namespace, folder: Path
) -> tuple[dict[str, float], dict[str, float]]:
    """Messages per step of a wave, then per second of an idle worker, of fresh worlds."""
    import wayline

    prefix = f"bt{uuid.uuid4().hex[:10]}"
    url = nc_bench.world_url(cluster.urls, prefix, partitions)
    world = wayline.open_world(url)
    await world.start()
    try:
        with nc_bench.worker(url, 1, folder / f"{prefix}.log"):
            client = wayline.Client(world)
            await nc_bench.burst(client, min(100, args.runs), args.steps)  # warm up
            async with Counter(cluster.urls, prefix) as wave:
                await nc_bench.burst(client, args.runs, args.steps)
    finally:
        await world.close()
    await drop(cluster, prefix)  # its idle streams would add to the idle worker's figures
    steps = args.runs * args.steps
    per_step = {f"{k} per step": n / steps for k, n in sorted(wave.counts.items())}
    per_step["all messages per step"] = sum(wave.counts.values()) / steps

    idle_prefix = f"bt{uuid.uuid4().hex[:10]}"
    idle_url = nc_bench.world_url(cluster.urls, idle_prefix, partitions)
    idle_world = wayline.open_world(idle_url)
    await idle_world.start()
    try:
        with nc_bench.worker(idle_url, 1, folder / f"{idle_prefix}.log") as proc:
            await asyncio.sleep(5)  # past the worker's start
            pids = nc_bench.descendants(proc.pid)
            marks = cluster.cpu(), {p: nc_bench.proc_cpu(p) for p in pids}
            async with Counter(cluster.urls, idle_prefix) as idle:
                await asyncio.sleep(args.idle)
            servers = sum(c - marks[0][n] for n, c in cluster.cpu().items())
            worker = sum(nc_bench.proc_cpu(p) - c for p, c in marks[1].items())
    finally:
        await idle_world.close()
    await drop(cluster, idle_prefix)
    per_second = {f"idle: {k} per second": n / args.idle for k, n in sorted(idle.counts.items())}
    per_second["idle: servers' CPU ms per second (three nodes)"] = servers * 1000 / args.idle
    per_second["idle: worker's CPU ms per second"] = worker * 1000 / args.idle
    return per_step, per_second


async def run(args: argparse.Namespace) -> tuple[nc_bench.Results, list[str]]:
    partitions = [int(p) for p in args.partitions.split(",")]
    results, load = nc_bench.Results(), []
    with contextlib.ExitStack() as stack:
        stack.callback(nc_bench.stop_workers)
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wayline-bt-")))
        cluster = stack.enter_context(nc_bench.servers(nc_bench.nats_binary(), args.sync, 3))
        for rnd in range(1, args.rounds + 1):
            load.append(", ".join(f"{x:.1f}" for x in os.getloadavg()))
            print(f"round {rnd}/{args.rounds}, load average {load[-1]}", flush=True)
            for n in partitions:
                per_step, per_second = await one(cluster, n, args, folder)
                config = f"{n} partition(s)"
                results.add(config, {**per_step, **per_second})
                for name, value in {**per_step, **per_second}.items():
                    print(f"    {config}: {name}: {value:.4g}", flush=True)
    return results, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,3", help="partition counts, e.g. 1,3")
    parser.add_argument("--runs", type=int, default=1000, help="runs at once per wave")
    parser.add_argument("--steps", type=int, default=10, help="no-op steps per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--idle", type=float, default=20, help="seconds of the idle worker")
    parser.add_argument("--sync", default="lazy", choices=sorted(nc_bench.SYNCS))
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    nc_bench.raise_on_signals()
    try:
        results, load = asyncio.run(run(args))
    except KeyboardInterrupt:
        raise SystemExit("interrupted: every process it started is stopped") from None
    configs = list(results.figures)
    lines = [
        f"Per partition count in turn, {args.rounds} round(s), `{args.sync}` sync, one cluster "
        f"of three nodes (R3): a wave of {args.runs} runs of {args.steps} no-op steps with one "
        "worker process, counted by a core NATS subscriber on `>`; then one worker process on "
        f"a fresh world with nothing to do for {args.idle:g} s, its messages counted the same "
        "way and the CPU read from /proc. Each cell is min-max over the rounds.",
        "",
        f"Load average (1, 5, 15 min) as each round began: {'; '.join(load)}.",
        "",
        *results.table(configs),
    ]
    nc_bench.show(HEADING, "`bench/nats_traffic.py`", lines, write=args.write)


if __name__ == "__main__":
    main()
