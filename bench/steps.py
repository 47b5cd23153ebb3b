"""What users wait for, on each world, next to the physical floor measured in the same run.
Prints the figures and writes bench/RESULTS.md.

    python bench/steps.py [--worlds local,nats,nats-always] [--repeat 3] [--quick] [--no-processes]
        [--sizes 10,1000] [--seq-runs 30] [--bursts 100,1000] [--sync full|normal]

Per world (SQLite ``local``; NATS JetStream ``nats`` on a throwaway nats-server with the
server's default ``sync_interval`` of 2 minutes, so a publish is acknowledged before it is on
disk; ``nats-always`` on one with ``sync_interval: always``, which fsyncs before each
acknowledgement, as the chart's NATS does):

- start->result per step: the wall time from ``client.start`` until ``handle.result()`` returns
  for one run of N no-op steps, divided by N; p50 / p95 over 30 sequential runs, N=10 and
  N=1000 (one worker in the benchmark's process, as in an embedded deployment);
- steps/s with 100 and 1,000 runs of 10 steps started at once and awaited at once;
- CPU seconds per 1,000 steps during the 1,000-run burst: the benchmark process (client and
  worker) and, on NATS, the nats-server process;
- the floors, measured in the same process run: one acknowledged JetStream publish on the
  world's own server (NATS; the faster of nats-py's ``js.publish`` and the world's own
  publish, both printed: so each NATS world is measured against its own sync setting);
  one SQLite commit of one row in WAL mode without fsync (``synchronous=NORMAL``, the local
  world's mode with ``--sync normal``) and with fsync (``FULL``, its default). Each figure is
  printed with its ratio to its floor (steps/s as the time per step, 1/throughput);
- NATS messages per run of 10 steps, counted on the client side by wrapping the nats
  client's ``request`` / ``publish`` / ``subscribe`` (``publish`` calls made inside a
  ``request`` are not counted twice): round trips (request), one-way sends (publish: pull
  requests, acks, replies) and subscriptions;
- ``wayline worker --processes 2`` vs ``--processes 1`` on NATS: steps/s of 1,000 concurrent
  runs served by worker subprocesses, the client in the benchmark's process.

Every figure is measured ``--repeat`` times (each repetition measures its own floors) and
reported as min-max. ``--quick`` uses smaller counts for a smoke run.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import contextvars
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

from flows import bench_chain
from results import headline_sections

import wayline

RESULTS = HERE / "RESULTS.md"
_OTHERS = ("## The operator at scale", "## Soak", "## NATS sync setting")
"""Sections of RESULTS.md that other benches write: kept when this one rewrites its own."""
FLOWS = HERE / "flows.py"


@dataclass
class Config:
    seq_runs: int = 30
    sizes: tuple[int, ...] = (10, 1000)
    bursts: tuple[int, ...] = (100, 1000)
    count_runs: int = 20
    process_runs: int = 1000

    @classmethod
    def quick(cls) -> Config:
        return cls(seq_runs=5, sizes=(10, 100), bursts=(100, 200), count_runs=5, process_runs=200)


@dataclass
class Figures:
    """One repetition's figures of one world: name -> value, and name -> floor name."""

    values: dict[str, float] = field(default_factory=dict)
    floors: dict[str, str] = field(default_factory=dict)


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median_ms(samples: int, once: Callable[[], Any]) -> float:
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        once()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


# --- floors -----------------------------------------------------------------------------------
async def publish_floor(url: str, samples: int = 2000) -> tuple[float, float]:
    """Median ms of one acknowledged JetStream publish of 128 bytes, two ways, interleaved:
    nats-py's ``js.publish``, and the world's own (``direct.publish_acked``: written at once,
    its reply handed over by the connection's reader). The floor is the faster of the two."""
    import nats
    from wayline.worlds.nats.direct import publish_acked

    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="BENCHFLOOR", subjects=["benchfloor.>"])
    body = b"x" * 128

    async def own() -> None:
        await publish_acked(nc, "benchfloor.x", body, {}, 5.0)

    async def nats_py() -> None:
        await js.publish("benchfloor.x", body)

    for _ in range(200):
        await own()
        await nats_py()
    times: dict[Any, list[float]] = {own: [], nats_py: []}
    for _ in range(samples // 2):
        for publish, out in times.items():
            t = time.perf_counter()
            await publish()
            out.append((time.perf_counter() - t) * 1000)
    await js.delete_stream("BENCHFLOOR")
    await nc.close()
    return statistics.median(times[own]), statistics.median(times[nats_py])


def commit_floor(directory: str, synchronous: str, samples: int) -> float:
    """One INSERT of a small row and its COMMIT, WAL mode, median ms."""
    path = Path(directory) / f"floor-{synchronous}.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    payload = b"x" * 128

    def once() -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t (body) VALUES (?)", (payload,))
        db.execute("COMMIT")

    for _ in range(50):
        once()
    floor = median_ms(samples, once)
    db.close()
    path.unlink()
    return floor


# --- what users wait for ----------------------------------------------------------------------
async def start_to_result(client: wayline.Client, n: int, runs: int) -> list[float]:
    """Per-step ms (start->result / N) of ``runs`` sequential runs of N steps."""
    per_step = []
    for _ in range(runs):
        t = time.perf_counter()
        handle = await client.start(bench_chain, n)
        await handle.result(timeout=600)
        per_step.append((time.perf_counter() - t) * 1000 / n)
    return per_step


def server_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def burst(client: wayline.Client, runs: int, steps: int = 10) -> float:
    """R runs started at once and awaited at once: total steps over the wall time until the
    last result is in the client's hands."""
    start = time.perf_counter()
    handles = await asyncio.gather(*(client.start(bench_chain, steps) for _ in range(runs)))
    await asyncio.gather(*(h.result(timeout=600) for h in handles))
    return runs * steps / (time.perf_counter() - start)


class NatsCalls:
    """Counts the nats client's calls in this process: request (a round trip), publish (not
    counted again inside a request; ``publish+reply`` when it names a reply subject, as an
    acknowledged JetStream publish or a pull does: a round trip too), subscribe, unsubscribe.
    The world's own publishes go through ``worlds/nats/wire.publish`` (written to the socket
    at once): counted there, as publishes, and not again if it hands one to nats-py's."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._inside = contextvars.ContextVar("inside_request", default=False)

    @contextlib.contextmanager
    def counting(self) -> Iterator[Counter[str]]:
        from nats.aio.client import Client
        from nats.aio.subscription import Subscription

        from wayline.worlds.nats import wire

        originals: dict[tuple[Any, str], Callable[..., Awaitable[Any]]] = {
            (Client, "request"): Client.request,
            (Client, "publish"): Client.publish,
            (Client, "subscribe"): Client.subscribe,
            (Subscription, "unsubscribe"): Subscription.unsubscribe,
            (wire, "publish"): wire.publish,
        }
        counts, inside = self.counts, self._inside

        def wrap(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def counted(*args: Any, **kwargs: Any) -> Any:
                if name == "request" or fn is wire_publish:
                    if fn is wire_publish:
                        if inside.get():
                            return await fn(*args, **kwargs)
                        counts["publish+reply" if kwargs.get("reply") else "publish"] += 1
                    else:
                        counts[name] += 1
                    token = inside.set(True)
                    try:
                        return await fn(*args, **kwargs)
                    finally:
                        inside.reset(token)
                if not inside.get():
                    reply = kwargs.get("reply", args[3] if len(args) > 3 else "")
                    counts[f"{name}+reply" if name == "publish" and reply else name] += 1
                return await fn(*args, **kwargs)

            return counted

        wire_publish = wire.publish
        for (cls, name), fn in originals.items():
            setattr(cls, name, wrap(name, fn))
        try:
            yield counts
        finally:
            for (cls, name), fn in originals.items():
                setattr(cls, name, fn)


async def bench_world(kind: str, url: str, cfg: Config, server_pid: int | None) -> Figures:
    fig = Figures()
    v = fig.values
    world = wayline.open_world(url)
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [bench_chain]):
        await start_to_result(client, 10, 5)  # warm up
        for n in cfg.sizes:
            per_step = await start_to_result(client, n, cfg.seq_runs)
            v[f"N={n} p50 (ms/step)"] = statistics.median(per_step)
            v[f"N={n} p95 (ms/step)"] = pct(per_step, 0.95)
        await burst(client, 100)  # warm up
        for runs in cfg.bursts:
            cpu, scpu = time.process_time(), server_cpu(server_pid)
            rate = await burst(client, runs)
            cpu, scpu = time.process_time() - cpu, server_cpu(server_pid) - scpu
            v[f"{runs} runs at once (steps/s)"] = rate
            if runs == cfg.bursts[-1]:
                steps = runs * 10
                v["CPU s / 1,000 steps, benchmark process"] = cpu * 1000 / steps
                if server_pid is not None:
                    v["CPU s / 1,000 steps, nats-server"] = scpu * 1000 / steps
        if kind.startswith("nats"):
            calls = NatsCalls()
            with calls.counting() as counts:
                await start_to_result(client, 10, cfg.count_runs)
            for name in ("request", "publish+reply", "publish", "subscribe", "unsubscribe"):
                v[f"nats {name} calls per 10-step run"] = counts[name] / cfg.count_runs
            trips = counts["request"] + counts["publish+reply"]
            v["nats round trips per 10-step run"] = trips / cfg.count_runs
    if kind.startswith("nats"):
        own, nats_py = await publish_floor(url)
        v["acknowledged publish, nats-py js.publish (ms)"] = nats_py
        v["acknowledged publish, the world's own (ms)"] = own
        v["floor: acknowledged JetStream publish (ms)"] = min(own, nats_py)
        floors = ["floor: acknowledged JetStream publish (ms)"]
    else:
        with tempfile.TemporaryDirectory() as tmp:
            v["floor: SQLite commit, no fsync (ms)"] = commit_floor(tmp, "NORMAL", 2000)
            v["floor: SQLite commit, fsync (ms)"] = commit_floor(tmp, "FULL", 500)
        floors = ["floor: SQLite commit, no fsync (ms)", "floor: SQLite commit, fsync (ms)"]
    for name in list(v):
        step_ms: float | None = None
        if name.startswith("N="):
            step_ms = v[name]
        elif name.endswith("(steps/s)"):
            step_ms = 1000 / v[name]
        if step_ms is not None:
            for floor in floors:
                v[f"{name} / {floor.split(':')[1].split('(')[0].strip()}"] = step_ms / v[floor]
    return fig


# --- worker processes -------------------------------------------------------------------------
@contextlib.contextmanager
def worker_processes(
    url: str, processes: int, log: Path, app: Path = FLOWS
) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ)  # not this folder on PYTHONPATH: its operator.py shadows the stdlib
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "wayline.cli", "worker", "--app", str(app)),
                *("--world", url, "--processes", str(processes)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=env,
        )
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count(" ready on ") < processes:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker processes did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its descendants alive now (the worker supervisor
    and its consumer processes)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            total += server_cpu(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return total


async def bench_processes(url: str, cfg: Config, server_pid: int | None) -> dict[str, float]:
    """Steps/s of 1,000 runs at once served by 1 and by 2 worker processes, with the CPU each
    party spent (workers, this process as the client, nats-server) and what that CPU allows:
    on C cores the 2-process burst cannot take less wall time than its CPU / C, so the best
    ratio this machine allows is (1-process time) / (2-process CPU / C)."""
    out: dict[str, float] = {}
    steps = cfg.process_runs * 10
    cpu_total: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for processes in (1, 2):
            prefixed = f"{url}?prefix=benchp{processes}x{uuid.uuid4().hex[:8]}"
            log = Path(tmp) / f"w{processes}.log"
            with worker_processes(prefixed, processes, log) as proc:
                world = wayline.open_world(prefixed)
                async with world:
                    client = wayline.Client(world)
                    await burst(client, 100)  # warm up
                    marks = tree_cpu(proc.pid), time.process_time(), server_cpu(server_pid)
                    rate = await burst(client, cfg.process_runs)
                    spent = [
                        after - before
                        for after, before in zip(
                            (tree_cpu(proc.pid), time.process_time(), server_cpu(server_pid)),
                            marks,
                            strict=True,
                        )
                    ]
            out[f"{processes} worker process(es), {cfg.process_runs} runs at once (steps/s)"] = rate
            for who, cpu in zip(("workers", "client", "nats-server"), spent, strict=True):
                out[f"{processes} process(es): CPU s / 1,000 steps, {who}"] = cpu * 1000 / steps
            cpu_total[processes] = sum(spent)
    one = out[next(k for k in out if k.startswith("1 worker"))]
    out["2 processes / 1"] = out[next(k for k in out if k.startswith("2 worker"))] / one
    cores = os.cpu_count() or 1
    out[f"2 processes / 1, the most {cores} cores allow"] = (steps / one) / (cpu_total[2] / cores)
    return out


# --- report -----------------------------------------------------------------------------------
def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, "
        f"{platform.system()}; load average at the end {load}"
    )


def fmt(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    digits = 0 if hi >= 100 else 2 if hi >= 1 else 3
    if lo == hi or len(values) == 1:
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f}-{hi:.{digits}f}"


def report(
    results: dict[str, list[dict[str, float]]],
    repeat: int,
    cfg: Config,
    note: str,
    failures: Sequence[str] = (),
) -> list[str]:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `bench/steps.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        f"Machine: {machine()}.",
        "",
        f"Each cell is min-max over {repeat} repetition(s) in one process run; every repetition "
        "measured its own floors, and each ratio is taken within its repetition.",
        "",
    ]
    if note:
        lines += [f"**{note}**", ""]
    lines += [
        f"Start->result per step: one run of N no-op steps, (result - start) / N, p50 and p95 "
        f"over {cfg.seq_runs} sequential runs, one worker in the benchmark's process. "
        "Runs at once: R runs of 10 steps started and awaited at once. CPU: during the "
        f"{cfg.bursts[-1]}-run burst. NATS calls: client-side count over {cfg.count_runs} "
        "sequential 10-step runs (request, and publish+reply: an acknowledged publish or a "
        "pull, are round trips; publish = a one-way send, e.g. an ack).",
        "",
    ]
    for kind, reps in results.items():
        lines += [f"## {kind}", "", "| figure | min-max |", "|---|---|"]
        names = list(dict.fromkeys(name for r in reps for name in r))
        for name in names:
            values = [r[name] for r in reps if name in r]
            lines.append(f"| {name} | {fmt(values)} ({len(values)} of {len(reps)}) |")
        lines.append("")
    if failures:
        lines += ["Failed measurements (their figures are missing above):", ""]
        lines += [f"- {f}" for f in failures] + [""]
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats,nats-always")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller counts, one repetition")
    parser.add_argument("--no-processes", action="store_true", help="skip 1 vs 2 processes")
    parser.add_argument("--note", default="", help="a line printed above the figures")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--sizes", help="N of the sequential runs, e.g. 10,1000,5000")
    parser.add_argument("--seq-runs", type=int, help="sequential runs per N (default 30)")
    parser.add_argument(
        "--bursts", help="R of the runs-at-once bursts, e.g. 100 (CPU is taken in the last)"
    )
    parser.add_argument(
        "--sync", choices=("full", "normal"), default="full", help="the SQLite world's sync="
    )
    args = parser.parse_args()
    cfg = Config.quick() if args.quick else Config()
    if args.sizes:
        cfg.sizes = tuple(int(n) for n in args.sizes.split(","))
    if args.seq_runs:
        cfg.seq_runs = args.seq_runs
    if args.bursts:
        cfg.bursts = tuple(int(n) for n in args.bursts.split(","))
    repeat = 1 if args.quick and args.repeat == 3 else args.repeat
    results: dict[str, list[dict[str, float]]] = {}
    failures: list[str] = []
    lines: list[str] = []
    with ExitStack() as stack:
        for kind in args.worlds.split(","):
            pid: int | None = None
            if kind == "local":
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
            elif kind in ("nats", "nats-always"):
                from nats_server import nats_server_process

                sync = "always" if kind == "nats-always" else None
                base, pid = stack.enter_context(nats_server_process(sync))
            else:
                raise SystemExit(f"unknown world {kind!r}")
            for rep in range(repeat):
                url = f"sqlite:///{tmp}/bench{rep}.db?sync={args.sync}" if kind == "local" else base
                if kind != "local":
                    url = f"{base}?prefix=bench{rep}x{os.getpid()}"
                figures = (await bench_world(kind, url, cfg, pid)).values
                if kind != "local" and not args.no_processes:
                    try:
                        figures.update(await bench_processes(base, cfg, pid))
                    except wayline.WaylineError as err:  # reported, the other figures kept
                        print(f"processes: {err}", file=sys.stderr, flush=True)
                        failures.append(f"{kind} repetition {rep + 1}, processes: {err}")
                results.setdefault(kind, []).append(figures)
                for name, value in figures.items():
                    print(f"{kind:5} [{rep + 1}/{repeat}] {name}: {value:.4g}", flush=True)
                # written after every repetition, so a late failure keeps the earlier figures
                lines = report(results, repeat, cfg, args.note, failures)
                old = args.output.read_text() if args.output.exists() else ""
                # other benches' sections (the operator at scale, the soak) are kept, and so
                # is the section of a world this run did not measure (as measured before)
                marks = [old.find(h) for h in _OTHERS if h in old]
                kept = old[min(marks) :] if marks else ""
                top = headline_sections(old)  # steady.py's headline stays first
                if top:
                    lines[1:1] = ["", top.rstrip("\n")]
                for other in {"local", "nats", "nats-always"} - set(results):
                    start = old.find(f"\n## {other}\n")
                    if start >= 0:
                        end = old.find("\n## ", start + 1)
                        lines.append(old[start + 1 : end if end >= 0 else len(old)].rstrip())
                        lines.append("")
                args.output.write_text("\n".join(lines) + ("\n" + kept if kept else ""))
    print("\n".join(lines))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    asyncio.run(main())
