"""A great many sleeping runs: the time to start them, what they cost while idle, and how
late a wave of them wakes when all fall due at once.

    python bench/sleepers.py [--worlds local,nats] [--runs 1000000] [--hooks 100000]
        [--waves 10000,100000] [--idle 20] [--idle-rounds 3] [--concurrency 64]
        [--clients 1] [--seed 1] [--write]

Per world (a SQLite file in a temporary folder; a throwaway nats-server):

1. ``--runs`` runs of a workflow that sleeps a random 1 h - 7 d (seeded), and ``--hooks`` runs
   waiting on a hook whose timeout is a random 1 h - 7 d, started by ``--clients`` processes,
   each with ``--concurrency`` tasks calling ``Client.start``. The start rate is the calls'
   (runs/s); "all asleep" is when no run is pending and no message is ready any more, so the
   worker has run each up to its wait.
2. Idle: with all of them asleep, ``--idle-rounds`` windows of ``--idle`` seconds each, the CPU
   (user + sys, from ``/proc/<pid>/stat``) and RSS of the worker process and of nats-server,
   and their context switches (a wake-up of an idle process costs at least one).
3. Each wave of ``--waves``: that many runs whose sleeps fall due at the same instant; the
   lateness of the step after the sleep (its body's start, less the instant), p50/p99/max:
   the max is when the wave was drained (every run past its sleep).

One worker process (``wayline worker`` as a user would run it is this, with the bench's
workflows) drives every run. ``--write`` puts the tables into ``bench/RESULTS.md``.
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
import random
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nats_server import nats_server_process
from processes import proc_sample, stop
from results import write_section

import wayline
from wayline._core.events import RunStatus
from wayline.world import FLOW_TOPIC, STEP_TOPIC
from wayline.world.routing import served_topics

HOUR, WEEK = 3600.0, 7 * 86400.0
HERE = Path(__file__).resolve()


@wayline.workflow(name="bench_sleepers_nap")
async def nap(seconds: float) -> None:
    await wayline.sleep(seconds)


@wayline.workflow(name="bench_sleepers_hook")
async def wait_hook(seconds: float) -> None:
    with contextlib.suppress(wayline.HookTimeout):
        await wayline.create_hook(timeout=seconds)


@wayline.step(name="bench_sleepers_woke")
async def woke(index: int, due_at: float) -> None:
    # One line per body, appended by the worker and read by the bench after the wave; a line
    # is far below the size the OS appends at once, so the lines of concurrent bodies do not mix.
    line = f"{index} {time.time() - due_at:.6f}\n"
    with open(os.environ["BENCH_SLEEPERS_STAMPS"], "a") as out:  # noqa: ASYNC230
        out.write(line)


@wayline.workflow(name="bench_sleepers_wave")
async def wave(index: int, due_at: float) -> None:
    await wayline.sleep(max(0.0, due_at - wayline.now().timestamp()))
    await woke(index, due_at)


WORKFLOWS = [nap, wait_hook, wave]


# --- the worker process ------------------------------------------------------------------


async def serve(url: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with wayline.open_world(url) as world, wayline.Worker(world, WORKFLOWS):
        print("ready", flush=True)
        await stop.wait()


@contextlib.contextmanager
def worker(url: str, stamps: Path) -> Iterator[int]:
    env = {**os.environ, "BENCH_SLEEPERS_STAMPS": str(stamps)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE), "--role", "worker", "--url", url],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the worker did not start")
        yield proc.pid
    finally:
        stop(proc)


# --- starting runs -----------------------------------------------------------------------


async def start_share(url: str, kind: str, first: int, count: int, seed: int) -> float:
    """Start runs ``first .. first+count`` of ``kind`` with ``--concurrency`` tasks; return the
    seconds it took."""
    rng = random.Random(seed * 1_000_003 + first)
    durations = [rng.uniform(HOUR, WEEK) for _ in range(count)]
    workflow = nap if kind == "nap" else wait_hook
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        left = iter(range(count))

        async def starter() -> None:
            for i in left:
                await client.start(workflow, durations[i])

        began = time.monotonic()
        await asyncio.gather(*(starter() for _ in range(ARGS.concurrency)))
        return time.monotonic() - began


def start_all(url: str, kind: str, count: int) -> float:
    """Start ``count`` runs of ``kind`` from ``--clients`` processes; the wall seconds."""
    if count <= 0:
        return 0.0
    shares = [count // ARGS.clients + (i < count % ARGS.clients) for i in range(ARGS.clients)]
    began = time.monotonic()
    if ARGS.clients == 1:
        asyncio.run(start_share(url, kind, 0, count, ARGS.seed))
    else:
        procs, first = [], 0
        for share in shares:
            procs.append(
                subprocess.Popen(
                    [
                        *(sys.executable, str(HERE), "--role", "starter", "--url", url),
                        *("--kind", kind, "--first", str(first), "--count", str(share)),
                        *("--seed", str(ARGS.seed), "--concurrency", str(ARGS.concurrency)),
                    ]
                )
            )
            first += share
        for proc in procs:
            if proc.wait() != 0:
                raise RuntimeError(f"a starter process failed ({proc.returncode})")
    return time.monotonic() - began


async def asleep(url: str, timeout: float) -> float:
    """Wait until no message is ready on the worker's topics for five looks a second apart
    (and, on SQLite, where counting is an indexed read, no run is pending); the seconds
    waited. On NATS, counting the runs reads the last entry of every run, which under load
    timed out at 100,000 runs, so the queue alone tells: a message the worker holds is not
    ready, but the worker holds at most its concurrency and settles them within seconds."""
    began = time.monotonic()
    topics = [t for kind in (FLOW_TOPIC, STEP_TOPIC) for t in served_topics(kind, WORKFLOWS, None)]
    quiet = 0
    async with wayline.open_world(url) as world:
        while time.monotonic() - began < timeout:
            ready = await world.ready_messages(topics)
            pending = 0
            if url.startswith("sqlite"):
                pending = (await world.count_runs()).get(RunStatus.PENDING, 0)
            quiet = quiet + 1 if pending == 0 and not any(ready.values()) else 0
            if quiet >= 5:
                return time.monotonic() - began
            await asyncio.sleep(1.0)
    raise RuntimeError(f"the runs were not all asleep within {timeout:g}s")


# --- idle --------------------------------------------------------------------------------


def idle(pids: dict[str, int]) -> dict[str, list[float]]:
    """CPU % of a core, RSS MB and context switches/s of each process, per window."""
    out: dict[str, list[float]] = {}
    for _ in range(ARGS.idle_rounds):
        before = {name: proc_sample(pid) for name, pid in pids.items()}
        began = time.monotonic()
        time.sleep(ARGS.idle)
        wall = time.monotonic() - began
        for name, pid in pids.items():
            cpu, rss, switches = proc_sample(pid)
            out.setdefault(f"{name} CPU % of a core", []).append(
                100 * (cpu - before[name][0]) / wall
            )
            out.setdefault(f"{name} RSS MB", []).append(rss / 1e6)
            out.setdefault(f"{name} context switches/s", []).append(
                (switches - before[name][2]) / wall
            )
    return out


# --- a wave ------------------------------------------------------------------------------


async def run_wave(url: str, size: int, rate: float, stamps: Path) -> dict[str, float]:
    """``size`` runs due at one instant, far enough ahead for all of them to be asleep at
    ``rate`` (runs/s from the first start to all asleep: the worker, not the client, sets it
    on SQLite)."""
    stamps.write_text("")  # noqa: ASYNC240 - before the wave, nothing else runs
    lead = 30.0 + 2.0 * size / rate
    due_at = time.time() + lead
    async with wayline.open_world(url) as world:
        client = wayline.Client(world)
        left = iter(range(size))

        async def starter() -> None:
            for i in left:
                await client.start(wave, i, due_at)

        await asyncio.gather(*(starter() for _ in range(ARGS.concurrency)))
    asleep_at = time.time() + await asleep(url, lead)
    if asleep_at > due_at:
        raise RuntimeError("the wave was not all asleep by its due time: raise the lead")
    # Done when every run's step after the sleep has started (its line is in the file).
    first: dict[int, float] = {}
    while len(first) < size:
        await asyncio.sleep(0.5)
        text = stamps.read_text()  # noqa: ASYNC240 - a small local file
        for line in text.split("\n")[:-1]:  # whole lines only: one may be half written
            index, late = line.split()
            first.setdefault(int(index), float(late))
        if time.time() - due_at > 3600:
            raise RuntimeError(f"{len(first)} of {size} wave runs woke within an hour")
    late = sorted(first.values())

    def pct(p: float) -> float:
        return late[min(len(late) - 1, int(p * len(late)))]

    return {
        "lateness p50 s": pct(0.50),
        "lateness p99 s": pct(0.99),
        "lateness max s": late[-1],
        "slack before due s": due_at - asleep_at,
    }


# --- one world ---------------------------------------------------------------------------


def shown(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    fmt = ".3f" if hi < 10 else ".1f" if hi < 1000 else ".0f"
    return f"{lo:{fmt}}" if len(values) == 1 else f"{lo:{fmt}}-{hi:{fmt}}"


def bench_world(kind: str) -> list[str]:
    lines = [f"### {kind}", ""]
    folder = Path(tempfile.mkdtemp(prefix="wayline-bench-sleepers-"))
    stamps = folder / "stamps.txt"
    with contextlib.ExitStack() as stack:
        pids: dict[str, int] = {}
        if kind == "local":
            url = f"sqlite:///{folder}/wayline.db"
        else:
            url, server = stack.enter_context(nats_server_process())
            pids["nats-server"] = server
        pids["worker"] = stack.enter_context(worker(url, stamps))
        load = [os.getloadavg()[0]]
        naps = start_all(url, "nap", ARGS.runs)
        hooks = start_all(url, "hook", ARGS.hooks)
        total = ARGS.runs + ARGS.hooks
        to_sleep = asyncio.run(asleep(url, 4 * 3600))
        load.append(os.getloadavg()[0])
        rate = total / (naps + hooks)
        rate_asleep = total / (naps + hooks + to_sleep)
        lines += [
            f"{ARGS.runs:,} sleeping runs and {ARGS.hooks:,} on hooks, started by "
            f"{ARGS.clients} client process(es) of {ARGS.concurrency} tasks each.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| start calls, s | {naps + hooks:.1f} |",
            f"| start rate, runs/s | {rate:.0f} |",
            f"| then until all asleep, s | {to_sleep:.1f} |",
            f"| first start to all asleep, runs/s | {rate_asleep:.0f} |",
        ]
        if kind == "local":
            size = sum(f.stat().st_size for f in folder.iterdir())
            lines.append(f"| SQLite files, MB | {size / 1e6:.0f} |")
        print("\n".join(lines), file=sys.stderr, flush=True)
        figures = idle(pids)
        load.append(os.getloadavg()[0])
        lines += ["", f"Idle, {ARGS.idle_rounds} windows of {ARGS.idle:g} s, min-max:", ""]
        lines += ["| figure | min-max |", "|---|---|"]
        lines += [f"| {k} | {shown(v)} |" for k, v in figures.items()]
        print("\n".join(lines[-len(figures) - 4 :]), file=sys.stderr, flush=True)
        for size in (int(w) for w in ARGS.waves.split(",") if w):
            got = asyncio.run(run_wave(url, size, rate_asleep, stamps))
            load.append(os.getloadavg()[0])
            lines += ["", f"Wave of {size:,} due at one instant:", "", "| figure | value |"]
            lines += ["|---|---|", *(f"| {k} | {v:.2f} |" for k, v in got.items())]
            print("\n".join(lines[-len(got) - 4 :]), file=sys.stderr, flush=True)
        lines += ["", f"Load average (1 min) while it ran: {shown(load)}.", ""]
    with contextlib.suppress(OSError):
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    return lines


def main() -> None:
    if ARGS.role == "worker":
        asyncio.run(serve(ARGS.url))
        return
    if ARGS.role == "starter":
        asyncio.run(start_share(ARGS.url, ARGS.kind, ARGS.first, ARGS.count, ARGS.seed))
        return
    lines: list[str] = []
    for kind in ARGS.worlds.split(","):
        lines += bench_world(kind)
    print("\n".join(lines))
    if ARGS.write:
        write_section(
            f"## Sleeping runs on {ARGS.worlds}: {ARGS.runs:,} + {ARGS.hooks:,} on hooks",
            "bench/sleepers.py",
            lines,
        )


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--worlds", default="local,nats")
parser.add_argument("--runs", type=int, default=1_000_000)
parser.add_argument("--hooks", type=int, default=100_000)
parser.add_argument("--waves", default="10000,100000")
parser.add_argument("--idle", type=float, default=20.0, help="seconds per idle window")
parser.add_argument("--idle-rounds", type=int, default=3)
parser.add_argument("--concurrency", type=int, default=64)
parser.add_argument("--clients", type=int, default=1)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--write", action="store_true")
parser.add_argument("--role", choices=("bench", "worker", "starter"), default="bench")
parser.add_argument("--url", default="")
parser.add_argument("--kind", default="nap")
parser.add_argument("--first", type=int, default=0)
parser.add_argument("--count", type=int, default=0)
ARGS = parser.parse_args()

if __name__ == "__main__":
    main()
