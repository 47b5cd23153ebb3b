"""A run that sleeps briefly between steps, on a worker with few flow slots and prompt wakes
off (``WAYLINE_PROMPT_WAKE_SECONDS=0``): its steps a second, and an idle worker's CPU and
context switches, for two trees of the runtime alternating (issues #38, #39).

    python bench/flow_slots.py --against 2081691 [--steps 20] [--rounds 3] [--idle 20]

Each round runs, for each world (SQLite, NATS) and each ``flow_concurrency`` (1, 2, 64), one
run of ``steps`` steps with a 0.1 s sleep after each, in a fresh process per tree (the old
tree first, then this one); the figure is steps divided by the time from the start to the
result. Then each tree's worker idles ``idle`` seconds in its own process (no run at all),
and its CPU time and context switches (every thread's) over that window are read from
``/proc``. Ratios new/old are taken within a round; the table shows min-max over the rounds.
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from nats_server import nats_server_process
from processes import proc_sample, stop

CONCURRENCIES = (1, 2, 64)
SLEEP_SECONDS = 0.1


def _workflows() -> list[object]:
    import wayline

    @wayline.step(name="bench_flow_slots_tick")
    async def tick(i: int) -> int:
        return i

    @wayline.workflow(name="bench_flow_slots_sleepy")
    async def sleepy(count: int) -> int:
        for i in range(count):
            await tick(i)
            await wayline.sleep(SLEEP_SECONDS)
        return count

    return [sleepy]


async def run_once(url: str, concurrency: int, steps: int) -> float:
    import wayline

    [sleepy] = _workflows()
    async with (
        wayline.open_world(url) as world,
        wayline.Worker(world, [sleepy], flow_concurrency=concurrency),  # type: ignore[list-item]
    ):
        began = time.monotonic()
        handle = await wayline.Client(world).start(sleepy, steps)  # type: ignore[arg-type]
        assert await handle.result(timeout=600) == steps
        return steps / (time.monotonic() - began)


async def idle_worker(url: str, concurrency: int) -> None:
    import wayline

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with (
        wayline.open_world(url) as world,
        wayline.Worker(world, _workflows(), flow_concurrency=concurrency),  # type: ignore[arg-type]
    ):
        print("ready", flush=True)
        await stop.wait()


def child(tree: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "runtime"),
        "WAYLINE_PROMPT_WAKE_SECONDS": "0",
    }
    return subprocess.Popen(
        [sys.executable, str(HERE), "--role", *args], env=env, stdout=subprocess.PIPE, text=True
    )


def steps_per_second(tree: Path, url: str, concurrency: int, steps: int) -> float:
    proc = child(
        tree, "run", "--url", url, "--concurrency", str(concurrency), "--steps", str(steps)
    )
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"the run failed in {tree} ({proc.returncode})")
    return float(json.loads(out.strip().splitlines()[-1])["steps_per_second"])


def idle(tree: Path, url: str, concurrency: int, seconds: float) -> tuple[float, float]:
    """CPU ms and context switches of an idle worker over ``seconds``, after a 2 s settle."""
    proc = child(tree, "idle", "--url", url, "--concurrency", str(concurrency))
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the idle worker of {tree} did not start")
        time.sleep(2.0)
        cpu0, _, sw0 = proc_sample(proc.pid)
        time.sleep(seconds)
        cpu1, _, sw1 = proc_sample(proc.pid)
        return 1000 * (cpu1 - cpu0), float(sw1 - sw0)
    finally:
        stop(proc)


@contextlib.contextmanager
def world_url(kind: str, folder: Path, name: str) -> Iterator[str]:
    if kind == "local":
        yield f"sqlite:///{folder}/{name}.db"
    else:
        with nats_server_process() as (url, _):
            yield url


def span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    fmt = "{:.3g}"
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{lo:.3g}-{hi:.3g}"


def main(args: argparse.Namespace) -> None:
    old = Path(tempfile.mkdtemp(prefix="wayline-bench-flowslots-old-"))
    folder = Path(tempfile.mkdtemp(prefix="wayline-bench-flowslots-"))
    try:
        measure(args, old, folder)
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


def measure(args: argparse.Namespace, old: Path, folder: Path) -> None:
    subprocess.run(
        f"git -C {ROOT} archive {args.against} runtime | tar -x -C {old}", shell=True, check=True
    )
    trees = {"old": old, "new": ROOT}
    rows: dict[str, dict[str, list[float]]] = {}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for kind in ("local", "nats"):
            for c in CONCURRENCIES:
                got = {}
                for label, tree in trees.items():
                    with world_url(kind, folder, f"{label}-{kind}-{c}-{r}") as url:
                        got[label] = steps_per_second(tree, url, c, args.steps)
                key = f"{kind} steps/s, flow_concurrency={c}"
                row = rows.setdefault(key, {"old": [], "new": [], "ratio": []})
                row["old"].append(got["old"])
                row["new"].append(got["new"])
                row["ratio"].append(got["new"] / got["old"])
                print(key, got, flush=True)
            if args.idle > 0:
                got2 = {}
                for label, tree in trees.items():
                    with world_url(kind, folder, f"idle-{label}-{kind}-{r}") as url:
                        got2[label] = idle(tree, url, 1, args.idle)
                for i, what in enumerate(("CPU ms", "context switches")):
                    key = f"{kind} idle worker (flow_concurrency=1), {what} in {args.idle:g} s"
                    row = rows.setdefault(key, {"old": [], "new": [], "ratio": []})
                    row["old"].append(got2["old"][i])
                    row["new"].append(got2["new"][i])
                    row["ratio"].append(got2["new"][i] / max(got2["old"][i], 1e-9))
                print(kind, "idle", got2, flush=True)
            loads.append(os.getloadavg()[0])
    print()
    print(
        f"{args.rounds} rounds, {args.steps} steps of a {SLEEP_SECONDS} s sleep each, "
        f"load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print()
    print(f"| figure | {args.against} | this tree | ratio new/old |")
    print("|---|---|---|---|")
    for key, row in rows.items():
        print(f"| {key} | {span(row['old'])} | {span(row['new'])} | {span(row['ratio'])} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("main", "run", "idle"), default="main")
    parser.add_argument("--url", default="")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--against", default="2081691")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=20.0)
    ARGS = parser.parse_args()
    if ARGS.role == "run":
        rate = asyncio.run(run_once(ARGS.url, ARGS.concurrency, ARGS.steps))
        print(json.dumps({"steps_per_second": rate}), flush=True)
    elif ARGS.role == "idle":
        asyncio.run(idle_worker(ARGS.url, ARGS.concurrency))
    else:
        main(ARGS)
