"""At which start position a small tenant's runs begin behind a large tenant's backlog.

    python bench/fairness.py [--worlds local,nats] [--a 10000] [--b 10] [--repeat 3]
                             [--b-priority N] [--a-key A] [--b-key B] [--workers N]
                             [--a-weight 1] [--b-weight 1] [--window N]

Per repetition, on a fresh world: ``Client.start_with`` starts ``--a`` runs with
``fairness_key="A"``, then ``--b`` runs with ``fairness_key="B"`` (and ``priority=N`` with
``--b-priority``), all on one queue (so their start messages share one topic, as the runs of one
worker's route do). ``--a-key``/``--b-key`` name the two keys instead (``--b-key B12`` is a key
whose hash picks A's lane on NATS, ``names.lane_of``: the case of two keys sharing a lane).
Nothing serves them meanwhile. Then the queue is drained as a worker with one free slot takes
work, one ``receive`` at a time, each acked at once, and the position (1 = the first work taken)
of each of B's starts is noted; draining stops once all of B's were taken. Printed: the
positions of B's first and last start, min-max over the repetitions. A receive is what a
worker's free slot does first with a run, so the position is the slot at which the run starts.
NATS runs on a throwaway nats-server (``bench/nats_server.py``).

With ``--workers N`` the queue is drained by N worker processes at once instead (each one
``python bench/fairness.py --drain ...``: its own world, so its own fair clock on NATS, one free
slot each, started together once all are connected). Each notes the wall clock at which it took
each start and its key; the positions are those of the merged takes, in the order of the
clocks (one machine, one clock). ``--a-weight``/``--b-weight`` give the keys weights, and
``--window W`` drains the first W takes instead and prints how many of them were A's and B's
(for two backlogged keys: B's share of the window, A weight 1 and B weight 3 expecting 3 B a A).
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
import subprocess
import tempfile
import time
from pathlib import Path

import wayline
from wayline._core import ordering
from wayline.world import FLOW_TOPIC, open_world
from wayline.world.routing import served_topics

QUEUE = "fairness-bench"
TOPIC = served_topics(FLOW_TOPIC, [], QUEUE)[0]


@wayline.workflow(name="bench_fairness.tenant_run")
async def tenant_run(label: str) -> str:
    return label


async def start_all(
    client: wayline.Client, key: str, count: int, priority: int | None = None, weight: int = 1
) -> set[str]:
    options = wayline.StartOptions(queue=QUEUE, fairness_key=key, fairness_weight=weight)
    if priority is not None:
        options = wayline.StartOptions(
            queue=QUEUE, fairness_key=key, fairness_weight=weight, priority=priority
        )
    started: set[str] = set()
    for first in range(0, count, 100):  # a hundred at a time: the order between keys holds
        handles = await asyncio.gather(
            *(
                client.start_with(options, tenant_run, f"{key}{i}")
                for i in range(first, min(count, first + 100))
            )
        )
        started.update(h.run_id for h in handles)
    return started


async def one(
    url: str,
    a: int,
    b: int,
    b_priority: int | None,
    keys: tuple[str, str] = ("A", "B"),
    weights: tuple[int, int] = (1, 1),
    window: int = 0,
    here: bool = True,
) -> list[str]:
    """Start A's runs, then B's; then, ``here``, the keys of the starts in the order this
    process took them: until all of B's were taken, or the first ``window`` of them."""
    world = open_world(url)
    await world.start()
    try:
        client = wayline.Client(world)
        began = time.monotonic()
        await start_all(client, keys[0], a, weight=weights[0])
        await start_all(client, keys[1], b, b_priority, weights[1])
        print(f"  {a + b} runs started in {time.monotonic() - began:.1f} s", flush=True)
        taken: list[str] = []
        while here and taken.count(keys[1]) < b and (not window or len(taken) < window):
            got = await world.receive(TOPIC, max_messages=1, wait_seconds=5)
            if not got:
                raise RuntimeError(f"the queue ran dry after {len(taken)} starts")
            for delivery in got:
                taken.append(key_of(delivery.payload))
                await world.ack(delivery)
        return taken
    finally:
        await world.close()


def key_of(payload: object) -> str:
    return ordering.of_payload(payload if isinstance(payload, dict) else None).fairness_key


def drain_in_processes(url: str, workers: int, b_key: str, b: int, window: int) -> list[str]:
    """Drain the queue with ``workers`` processes (``drain``) until B's ``b`` starts, or the
    first ``window`` starts, were taken; the keys of the takes merged by their clocks."""
    with tempfile.TemporaryDirectory(prefix="wayline-bench-fair-") as tmp:
        folder = Path(tmp)
        me = os.path.abspath(__file__)
        procs = [
            subprocess.Popen([sys.executable, me, "--drain", url, str(folder / f"w{i}")])
            for i in range(workers)
        ]
        try:
            while sum((folder / f"w{i}.ready").exists() for i in range(workers)) < workers:
                time.sleep(0.05)
            (folder / "go").touch()  # all connected: they take their first starts together
            while True:
                time.sleep(0.05)
                taken = merged(folder, workers)
                if (window and len(taken) >= window) or (not window and taken.count(b_key) >= b):
                    break
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError("a worker process ended before the measure")
            (folder / "stop").touch()
            for proc in procs:
                proc.wait(timeout=60)
            taken = merged(folder, workers)
            for i in range(workers):  # each process's own turns, as it took them
                own = [key for _, key in notes_of(folder / f"w{i}")]
                print(f"  process {i + 1} took {' '.join(own[:16])} ...", flush=True)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    if window:
        return taken[:window]
    last = [i for i, key in enumerate(taken) if key == b_key][b - 1]
    return taken[: last + 1]


def merged(folder: Path, workers: int) -> list[str]:
    """The keys every worker process noted so far, in the order of their clocks."""
    takes = [take for i in range(workers) for take in notes_of(folder / f"w{i}")]
    return [key for _, key in sorted(takes)]


def notes_of(path: Path) -> list[tuple[int, str]]:
    """The clock and the key of each take one worker process noted so far, whole lines only
    (a take is written in one line, ended by a tab before its newline)."""
    if not path.exists():
        return []
    notes = [line.partition(" ") for line in path.read_text().splitlines()]
    return [(int(at), key[:-1]) for at, _, key in notes if key.endswith("\t")]


async def drain(url: str, out: str) -> None:
    """One worker process with one free slot: take the queue's starts one at a time, acking
    each, and note the clock and the key of each, until told to stop. The files are small and
    local: looking at them blocks for no time worth a thread."""
    folder = Path(out).parent
    world = open_world(url)
    await world.start()
    try:
        Path(out + ".ready").touch()  # noqa: ASYNC240
        while not (folder / "go").exists():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        with open(out, "a") as notes:  # noqa: ASYNC230
            while not (folder / "stop").exists():
                for delivery in await world.receive(TOPIC, max_messages=1, wait_seconds=0.5):
                    notes.write(f"{time.time_ns()} {key_of(delivery.payload)}\t\n")
                    notes.flush()
                    await world.ack(delivery)
    finally:
        await world.close()


def main() -> None:
    if sys.argv[1:2] == ["--drain"]:
        asyncio.run(drain(*sys.argv[2:4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--a", type=int, default=10_000)
    parser.add_argument("--b", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--b-priority", type=int, default=None, help="B's priority (0-9)")
    parser.add_argument("--a-key", default="A", help="the large tenant's fairness key")
    parser.add_argument("--b-key", default="B", help="the small tenant's fairness key")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: this one)")
    parser.add_argument("--a-weight", type=int, default=1)
    parser.add_argument("--b-weight", type=int, default=1)
    parser.add_argument("--window", type=int, default=0, help="takes counted (0: until B's end)")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for nats_server
    from nats_server import machine, world_url

    print(machine())
    for kind in args.worlds.split(","):
        firsts: list[int] = []
        lasts: list[int] = []
        shares: list[tuple[int, int]] = []
        for rep in range(args.repeat):
            print(
                f"{kind}: {args.a} runs of {args.a_key}, then {args.b} of {args.b_key}, "
                f"weights {args.a_weight} and {args.b_weight}, "
                f"{args.workers or 'no'} worker processes (repetition {rep + 1})"
            )
            with world_url(kind, "fair") as url:
                keys = (args.a_key, args.b_key)
                weights = (args.a_weight, args.b_weight)
                here = not args.workers
                taken = asyncio.run(
                    one(url, args.a, args.b, args.b_priority, keys, weights, args.window, here)
                )
                if args.workers:
                    taken = drain_in_processes(url, args.workers, args.b_key, args.b, args.window)
            if args.window:
                counts = (taken.count(args.a_key), taken.count(args.b_key))
                shares.append(counts)
                print(
                    f"  of the first {len(taken)} taken: {counts[0]} A, {counts[1]} B", flush=True
                )
                continue
            positions = [i + 1 for i, key in enumerate(taken) if key == args.b_key]
            print(f"  B's runs started at positions {positions}", flush=True)
            firsts.append(positions[0])
            lasts.append(positions[-1])
        if args.window:
            ratios = [b / a if a else float("inf") for a, b in shares]
            print(
                f"{kind}: B taken {min(b for _, b in shares)}-{max(b for _, b in shares)} of "
                f"{args.window}, B / A {min(ratios):.2f}-{max(ratios):.2f} "
                f"(min-max over {args.repeat})"
            )
            continue
        print(
            f"{kind}: B's first run at position {min(firsts)}-{max(firsts)}, "
            f"its last at {min(lasts)}-{max(lasts)} (min-max over {args.repeat})"
        )
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
