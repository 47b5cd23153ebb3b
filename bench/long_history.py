"""Per-step cost of one run as its log grows: 10 steps against 50,000 in one run.

    python bench/long_history.py [--worlds local,nats] [--long 50000] [--short 10]
        [--rounds 3] [--window 1000] [--shape steps|sleeps] [--replay-cache RUNS]
        [--short-runs 500]

A run of ``--long`` sequential no-op steps and runs of ``--short`` steps (as many as make the
same number of steps, at most ``--short-runs``) are driven by one worker in this process, on the
local world (a SQLite file) and on NATS (a throwaway nats-server). For each, per step: this
process's CPU (which holds the client, the worker and, on SQLite, the world), event-loop turns,
the events the engine read back from the world, and the deliveries the worker received and
acknowledged (with those of a sleep's own delayed message apart: with ``--shape sleeps``, a
sleep woken in process withdraws its message, and those counted came anyway). For the long
run, the CPU of its first and of its last ``--window`` steps is given apart too (the step
bodies stamp ``time.process_time()``): a cost that grew with the log shows as a last window
dearer than the first, and their ratio within a round is given too (the load of the shared
machine changes between rounds). Each figure is the min-max over ``--rounds`` rounds. The
run's log is far past the default history limit (``WAYLINE_HISTORY_LIMIT_EVENTS``), which the
bench turns off for its worker.

``--shape sleeps`` puts a 1 ms sleep after each step: every step is then driven by a delivery
of its own (the wake). With the worker's cache of live replays off (``--replay-cache 0``),
each wake replays the run's log from its first event; with it on (the default,
``WAYLINE_REPLAY_CACHE_RUNS``), a wake feeds the run's live replay the events after it.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nats_server import nats_server

import wayline
from wayline.settings import Settings

STAMPS: list[float] = []


@wayline.step(name="bench_lh_tick")
async def tick(i: int) -> int:
    STAMPS.append(time.process_time())
    return i


@wayline.workflow(name="bench_lh_steps")
async def steps(count: int) -> int:
    for i in range(count):
        await tick(i)
    return count


@wayline.workflow(name="bench_lh_sleepy")
async def sleepy(count: int) -> int:
    """A step, then a short sleep, ``count`` times: each wake is a new delivery, which
    replays the run from its log."""
    for i in range(count):
        await tick(i)
        await wayline.sleep(0.001)
    return count


class CountingLoop(asyncio.SelectorEventLoop):
    turns = 0

    def _run_once(self) -> None:
        CountingLoop.turns += 1
        super()._run_once()  # type: ignore[misc]


def counted(world: wayline.World, read: Counter[str]) -> None:
    """Count the events every read of a run's log returns (the engine's reads, and the
    client's of the run's end)."""
    list_events, read_run, read_run_at = world.list_events, world.read_run, world.read_run_at
    read_run_after = world.read_run_after

    async def list_counted(run_id: str, *args: Any, **kwargs: Any) -> Any:
        events = await list_events(run_id, *args, **kwargs)
        read["events read"] += len(events)
        return events

    async def read_counted(run_id: str) -> Any:
        info, events = await read_run(run_id)
        read["events read"] += len(events)
        return info, events

    async def read_at_counted(run_id: str, mark: str) -> Any:
        info, events = await read_run_at(run_id, mark)
        read["events read"] += len(events)
        return info, events

    async def read_after_counted(run_id: str, after_seq: int) -> Any:
        info, events = await read_run_after(run_id, after_seq)
        read["events read"] += len(events)
        return info, events

    receive, ack = world.receive, world.ack

    async def receive_counted(topic: str, **kwargs: Any) -> Any:
        got = await receive(topic, **kwargs)
        read["deliveries"] += len(got)
        read["wake deliveries"] += sum((d.payload or {}).get("reason") == "wait" for d in got)
        return got

    async def ack_counted(delivery: Any) -> Any:
        read["acks"] += 1
        return await ack(delivery)

    world.receive = receive_counted  # type: ignore[method-assign]
    world.ack = ack_counted  # type: ignore[method-assign]
    world.read_run_after = read_after_counted  # type: ignore[method-assign]
    world.list_events = list_counted  # type: ignore[method-assign]
    world.read_run = read_counted  # type: ignore[method-assign]
    world.read_run_at = read_at_counted  # type: ignore[method-assign]


async def measure(url: str, runs: int, count: int) -> dict[str, float]:
    world = wayline.open_world(url)
    await world.start()
    read: Counter[str] = Counter()
    counted(world, read)
    settings = Settings(
        **{
            **_defaults(),
            "history_limit_events": 0,
            "history_warn_events": 0,
            "replay_cache_runs": ARGS.replay_cache,
        }
    )
    client = wayline.Client(world)
    try:
        workflow = sleepy if ARGS.shape == "sleeps" else steps
        async with wayline.Worker(world, [steps, sleepy], settings=settings):
            await (await client.start(workflow, 3)).result(timeout=60)  # warm
            read.clear()
            STAMPS.clear()
            turns, cpu, wall = CountingLoop.turns, time.process_time(), time.monotonic()
            for _ in range(runs):
                await (await client.start(workflow, count)).result(timeout=3600)
            cpu, turns = time.process_time() - cpu, CountingLoop.turns - turns
            wall = time.monotonic() - wall
    finally:
        await world.close()
    total = runs * count
    out = {
        "CPU ms/step": 1000 * cpu / total,
        "loop turns/step": turns / total,
        "events read/step": read["events read"] / total,
        "deliveries/step": read["deliveries"] / total,
        "acks/step": read["acks"] / total,
        "sleeps' own wakes delivered/step": read["wake deliveries"] / total,
        "steps/s (wall)": total / wall,
    }
    window = min(ARGS.window, count // 2)
    if runs == 1 and window >= 10:
        first = STAMPS[window] - STAMPS[0]
        last = STAMPS[-1] - STAMPS[-1 - window]
        out[f"CPU ms/step, first {window}"] = 1000 * first / window
        out[f"CPU ms/step, last {window}"] = 1000 * last / window
        # within the round, so the machine's load between rounds does not enter it
        out[f"last {window} / first {window}"] = last / first
    return out


def _defaults() -> dict[str, Any]:
    base = Settings.from_env({})
    return {f: getattr(base, f) for f in base.__dataclass_fields__}


def shown(rounds: list[dict[str, float]]) -> dict[str, str]:
    return {
        k: f"{min(r[k] for r in rounds):.3f}-{max(r[k] for r in rounds):.3f}" for k in rounds[0]
    }


async def bench(world: str, url_of: Any) -> None:
    short: list[dict[str, float]] = []
    long: list[dict[str, float]] = []
    for round_ in range(ARGS.rounds):
        runs = max(1, min(ARGS.long // ARGS.short, ARGS.short_runs))
        short.append(await measure(url_of(round_, "short"), runs, ARGS.short))
        long.append(await measure(url_of(round_, "long"), 1, ARGS.long))
        print(f"{world} round {round_ + 1}: {short[-1]} {long[-1]}", file=sys.stderr, flush=True)
    s, lg = shown(short), shown(long)
    print(f"\n{world}: per step, min-max over {ARGS.rounds} rounds")
    print(f"| figure | {ARGS.short} steps a run | {ARGS.long} steps in one run |")
    print("|---|---|---|")
    for key in lg:
        print(f"| {key} | {s.get(key, '-')} | {lg[key]} |")
    ratio = [lo["CPU ms/step"] / sh["CPU ms/step"] for lo, sh in zip(long, short, strict=True)]
    print(f"\nlong/short CPU per step: {min(ratio):.2f}-{max(ratio):.2f}x")


def _run(coro: Any) -> None:
    with asyncio.Runner(loop_factory=CountingLoop) as runner:
        runner.run(coro)


def main() -> None:
    # a long run's SQLite files (its log and WAL) are removed when the bench ends
    with tempfile.TemporaryDirectory(prefix="wayline-bench-long-") as folder:
        for world in ARGS.worlds.split(","):
            if world == "local":
                _run(bench(world, lambda r, k: f"sqlite:///{folder}/{k}-{r}.db"))
            else:
                with nats_server() as url:
                    _run(bench(world, lambda r, k: url))


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--worlds", default="local")
parser.add_argument("--long", type=int, default=50_000)
parser.add_argument("--short", type=int, default=10)
parser.add_argument("--rounds", type=int, default=3)
# a wake per step on NATS waits for its delayed message, so 500 short runs take minutes of wall time
parser.add_argument("--short-runs", type=int, default=500, help="at most this many short runs")
parser.add_argument("--window", type=int, default=1000)
parser.add_argument("--shape", choices=("steps", "sleeps"), default="steps")
parser.add_argument("--replay-cache", type=int, default=256, help="0: no live replays kept")
ARGS = parser.parse_args()

if __name__ == "__main__":
    main()
