"""Steady figures per step, which the machine's load and floors do not move: event-loop turns,
tasks and futures made, syscalls by kind, WAL page writes (SQLite), NATS round trips, and CPU
per process. With ``--against COMMIT``, an interleaved A/B of this tree and another commit.

    python bench/steady.py [--worlds local,nats] [--steps 10] [--runs 20] [--at-once] [--rounds 3]
        [--against COMMIT] [--old-env K=V] [--new-env K=V] [--no-strace] [--sync full|normal]
        [--write] [--turns]

``--turns`` adds, per tree and world, where the loop turns of a step go: for each callback
the loop ran (a task's step is named by its coroutine's qualified name, any other callback by
its function's), how many times a step ran it, and the most common turns, each named by the
callbacks it ran in order, with how many times a step took it. The counting wraps
``asyncio.Handle._run``, so it costs CPU: the turns, tasks and futures it reports are exact,
its CPU figures are not to be compared with a run without it.

``--old-env`` and ``--new-env`` set environment variables for the old tree's children or this
tree's, so one tree can be measured against itself with another codec or event loop
(``--against . --new-env WAYLINE_LOOP=uvloop``). A child whose ``WAYLINE_LOOP`` is ``uvloop``
runs on uvloop, which has no Python-level turn to count: it reports CPU, tasks and futures
(those made through the loop's Python methods) and syscalls, not loop turns.

Each measurement runs in a child process (``--child``) that imports the ``wayline`` of one
tree, so two commits can be measured by one run of this script: the other commit's
``runtime`` folder is exported with ``git archive`` into a temporary folder (no worktree is
registered in the repository, so nothing is left behind if the run is killed) and the
rounds alternate, old then new, each against the same servers, so a regression shows as a
ratio whatever the machine's floor does meanwhile.

A child opens the world, starts one worker in its own process (as an embedded deployment
does: the client and the worker share one process and one event loop), warms up, then runs
``--runs`` sequential runs (``--at-once``: started and awaited at once) of ``--steps`` no-op
steps twice:

- untraced: CPU of this process and of nats-server (from ``/proc``), event-loop turns
  (``_run_once`` calls; those whose ``select`` could block, i.e. had no callback ready, are
  counted apart as blocking turns), tasks (``create_task``) and futures (``create_future``)
  made, the engine's eager tasks made (``wayline._engine.eager.start``: a step body's task
  and its inline batch's, which take their first step at once and never go through
  ``create_task``; a tree without them counts none), and on NATS the client's calls
  (``steps.NatsCalls``: a request or a publish naming a reply subject is a round trip);
- traced by ``strace -f`` attached to the child for this part only: syscalls by kind, and
  (SQLite) the page-sized ``pwrite64`` calls on the ``-wal`` file, one per WAL page written.

Every figure is divided by the steps run (runs x steps). ``--write`` puts the tables at the
top of ``bench/RESULTS.md`` as its headline; the headline they replace moves under the earlier
headlines below it. Measure against the commit of the previous headline, so the headline's
ratios say what changed since.
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
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_LINE = re.compile(r"^(?:\d+ +)?(\w+)\((.*)$")
_WAL_WRITE = re.compile(r"^\d+<[^>]*-wal>, [^,]*, (\d+),")


# --- the child: one tree's wayline, measured -------------------------------------------------
class CountingLoop(asyncio.SelectorEventLoop):
    """Counts loop turns, the turns that could block in ``select``, tasks and futures made."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.turns: Counter[tuple[str, ...]] | None = None  # --turns: each turn's callbacks
        self._ran: list[str] = []  # the callbacks of the turn being run
        select = self._selector.select  # type: ignore[attr-defined]
        counts = self.counts

        def counted_select(timeout: float | None = None) -> Any:
            if timeout is None or timeout > 0:
                counts["blocking loop turns"] += 1
            return select(timeout)

        self._selector.select = counted_select  # type: ignore[attr-defined]

    def _run_once(self) -> None:
        self.counts["loop turns"] += 1
        turns = self.turns  # the recording may stop within this turn
        if turns is None:
            super()._run_once()  # type: ignore[misc]
            return
        self._ran = []
        super()._run_once()  # type: ignore[misc]
        turns[tuple(self._ran)] += 1

    def record_turns(self) -> None:
        """Name the callbacks of every turn from now on (``--turns``)."""
        self.turns = Counter()
        run = asyncio.Handle._run
        loop = self

        def named_run(handle: asyncio.Handle) -> None:
            if handle._loop is loop:  # type: ignore[attr-defined]
                loop._ran.append(callback_name(handle._callback))  # type: ignore[attr-defined]
            run(handle)

        asyncio.Handle._run = named_run  # type: ignore[method-assign]

    def create_future(self) -> asyncio.Future[Any]:
        self.counts["futures made"] += 1
        return super().create_future()

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        self.counts["tasks made"] += 1
        return super().create_task(coro, **kwargs)


def callback_name(callback: Any) -> str:
    """A loop callback's name: a task's step by its coroutine, a function by its qualified
    name, a ``functools.partial`` by the function it wraps."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        what = getattr(coro, "__qualname__", type(coro).__qualname__)
        return f"task {what} ({getattr(callback, '__name__', '?')})"
    func = getattr(callback, "func", callback)  # functools.partial
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    module = getattr(func, "__module__", None) or ""
    return f"{module.rpartition('.')[2]}.{name}" if module else name


def counting_uvloop() -> asyncio.AbstractEventLoop:
    """A uvloop loop that counts the tasks and futures made through its Python methods."""
    import uvloop

    class CountingUvloop(uvloop.Loop):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.counts: Counter[str] = Counter()

        def create_future(self) -> asyncio.Future[Any]:
            self.counts["futures made"] += 1
            return super().create_future()  # type: ignore[no-any-return]

        def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            self.counts["tasks made"] += 1
            return super().create_task(coro, **kwargs)  # type: ignore[no-any-return]

    return CountingUvloop()


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _hear() -> str:
    return sys.stdin.readline().strip()


async def child(
    url: str,
    steps: int,
    runs: int,
    server_pid: int | None,
    at_once: bool = False,
    turns: bool = False,
) -> None:
    import wayline

    sys.path.append(str(HERE))
    from flows import bench_chain
    from steps import NatsCalls

    loop: Any = asyncio.get_running_loop()
    assert isinstance(loop.counts, Counter)
    _count_eager_tasks(loop.counts)
    world = wayline.open_world(url)
    client = wayline.Client(world)

    async def chain() -> None:
        if at_once:  # started at once and awaited at once: appends and ends overlap
            handles = await asyncio.gather(*(client.start(bench_chain, steps) for _ in range(runs)))
            await asyncio.gather(*(h.result(timeout=120) for h in handles))
            return
        for _ in range(runs):
            handle = await client.start(bench_chain, steps)
            await handle.result(timeout=120)

    async with world, wayline.Worker(world, [bench_chain]):
        for _ in range(3):  # warm up: imports, caches, the first run's setup
            await (await client.start(bench_chain, steps)).result(timeout=120)
        _say("ready untraced")
        _hear()
        loop.counts.clear()
        if turns:
            loop.record_turns()
        cpu, server = time.process_time(), proc_cpu(server_pid) if server_pid else 0.0
        calls = NatsCalls()
        with calls.counting() if url.startswith("nats") else contextlib.nullcontext():
            await chain()
        cpu = time.process_time() - cpu
        server = proc_cpu(server_pid) - server if server_pid else 0.0
        out: dict[str, float] = {"CPU ms, client+worker process": cpu * 1000}
        if server_pid:
            out["CPU ms, nats-server"] = server * 1000
        out.update(loop.counts)
        if url.startswith("nats"):
            out["nats round trips"] = calls.counts["request"] + calls.counts["publish+reply"]
            out["nats one-way sends"] = calls.counts["publish"]
        if turns:
            recorded, loop.turns = loop.turns, None
            per_turn: Counter[str] = Counter()
            for ran, n in recorded.items():
                for name in ran:
                    per_turn[f"callback: {name}"] += n
            out.update(per_turn)
            for ran, n in recorded.most_common(12):
                out["turn: " + (" + ".join(ran) or "(no callback: select only)")] = n
        _say("figures " + json.dumps({k: v / (steps * runs) for k, v in out.items()}))
        _say("ready traced")
        _hear()
        await chain()
        _say("done traced")
        _hear()


def _count_eager_tasks(counts: Counter[str]) -> None:
    """Count the engine's eager tasks, which the loop never sees made (a tree older than
    ``wayline._engine.eager`` makes none)."""
    try:
        from wayline._engine import eager
    except ImportError:
        return
    start = eager.start

    def counted(coro: Any, name: str | None = None, **kw: Any) -> Any:
        counts["eager tasks made"] += 1
        return start(coro, name=name, **kw)  # ``loop=`` where the engine holds it

    eager.start = counted


def child_main(args: argparse.Namespace) -> None:
    tree = Path(args.tree).resolve()
    sys.path.insert(0, str(tree / "runtime"))
    import wayline

    where = Path(wayline.__file__).resolve()
    if tree not in where.parents:
        raise SystemExit(f"imported wayline from {where}, not from {tree}")
    loop = counting_uvloop() if os.environ.get("WAYLINE_LOOP") == "uvloop" else CountingLoop()
    try:
        loop.run_until_complete(
            child(args.url, args.steps, args.runs, args.server_pid, args.at_once, args.turns)
        )
    finally:
        loop.close()


# --- the parent: trees, servers, rounds -------------------------------------------------------
def parse_strace(path: Path, page_size: int = 4096) -> Counter[str]:
    """Syscalls by kind from ``strace -f -y -s 0`` output, and the WAL page writes."""
    counts: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        if "resumed>" in line or line.startswith("+++") or line.startswith("---"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        name, rest = m.groups()
        counts[name] += 1
        if name in ("pwrite64", "pwrite") and (w := _WAL_WRITE.match(rest)):
            counts["(WAL page writes)"] += int(w.group(1)) >= page_size
    return counts


def measure(
    tree: Path,
    url: str,
    steps: int,
    runs: int,
    server_pid: int | None,
    strace: str | None,
    at_once: bool = False,
    env: dict[str, str] | None = None,
    turns: bool = False,
) -> dict[str, float]:
    """One child: its untraced figures and, with strace, its syscalls; per step."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            *("--child", "--tree", str(tree), "--url", url),
            *("--steps", str(steps), "--runs", str(runs)),
            *(("--at-once",) if at_once else ()),
            *(("--turns",) if turns else ()),
            *(("--server-pid", str(server_pid)) if server_pid else ()),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),  # not the tree: the child imports only the tree named
        env={**os.environ, **(env or {})},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def expect(prefix: str) -> str:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith(prefix):
            proc.kill()
            raise RuntimeError(f"child said {line!r}, expected {prefix!r} (exit {proc.wait()})")
        return line[len(prefix) :]

    def tell(stdin: IO[str]) -> None:
        stdin.write("go\n")
        stdin.flush()

    try:
        expect("ready untraced")
        tell(proc.stdin)
        figures: dict[str, float] = json.loads(expect("figures "))
        expect("ready traced")
        if strace:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "strace.txt"
                tracer = subprocess.Popen(
                    [strace, "-f", "-y", "-s", "0", "-o", str(out), "-p", str(proc.pid)],
                    stderr=subprocess.PIPE,
                    text=True,
                )
                assert tracer.stderr is not None
                # strace says so on stderr once it has attached to the process's threads
                while "attached" not in tracer.stderr.readline():
                    if tracer.poll() is not None:
                        raise RuntimeError("strace could not attach (ptrace refused?)")
                time.sleep(0.2)
                tell(proc.stdin)
                expect("done traced")
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
                total = 0
                for name, n in sorted(parse_strace(out).items()):
                    key = name if name.startswith("(") else f"syscalls: {name}"
                    figures[key] = n / (steps * runs)
                    total += 0 if name.startswith("(") else n
                figures["syscalls (all)"] = total / (steps * runs)
        else:
            tell(proc.stdin)
            expect("done traced")
        tell(proc.stdin)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return figures


@contextlib.contextmanager
def exported(commit: str) -> Iterator[Path]:
    """The commit's ``runtime`` folder in a temporary folder (``git archive``); a folder that
    holds a ``runtime`` folder (another checkout) is used as it is."""
    if (Path(commit) / "runtime" / "wayline").is_dir():
        yield Path(commit).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="wayline-ab-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "runtime"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def fmt(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    digits = 1 if hi >= 10 else 2 if hi >= 1 else 3
    return f"{lo:.{digits}f}" if lo == hi else f"{lo:.{digits}f}-{hi:.{digits}f}"


def table(
    results: dict[tuple[str, str], list[dict[str, float]]], trees: list[str], worlds: list[str]
) -> list[str]:
    """A markdown table per world: each tree's min-max, and the ratio new/old per round."""
    lines: list[str] = []
    for world in worlds:
        head = "| per step | " + " | ".join(trees)
        head += " | ratio new/old |" if len(trees) == 2 else " |"
        lines += [f"### {world}", "", head, "|---" * (len(trees) + 1 + (len(trees) == 2)) + "|"]
        reps = {t: results[(t, world)] for t in trees}
        names = list(dict.fromkeys(n for t in trees for r in reps[t] for n in r))
        for name in names:
            cells = [fmt([r.get(name, 0.0) for r in reps[t]]) for t in trees]
            if len(trees) == 2:
                pairs = zip(reps[trees[0]], reps[trees[1]], strict=True)
                ratios = [b[name] / a[name] for a, b in pairs if a.get(name) and name in b]
                cells.append(fmt(ratios) if ratios else "-")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--steps", type=int, default=10, help="steps per run (N)")
    parser.add_argument("--runs", type=int, default=20, help="sequential runs measured")
    parser.add_argument(
        "--at-once", action="store_true", help="the runs started and awaited at once"
    )
    parser.add_argument("--rounds", type=int, default=3, help="repetitions (alternated in A/B)")
    parser.add_argument(
        "--against", help="a commit (or a checkout's folder) to compare with, interleaved"
    )
    parser.add_argument(
        "--old-env", action="append", default=[], help="K=V for the old tree's children"
    )
    parser.add_argument(
        "--new-env", action="append", default=[], help="K=V for this tree's children"
    )
    parser.add_argument("--no-strace", action="store_true", help="skip the syscall counts")
    parser.add_argument("--sync", choices=("full", "normal"), default="normal")
    parser.add_argument(
        "--write", action="store_true", help="the tables become RESULTS.md's headline"
    )
    parser.add_argument(
        "--turns", action="store_true", help="name the callbacks each step's loop turns ran"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    strace = None if args.no_strace else shutil.which("strace")
    if strace is None and not args.no_strace:
        raise SystemExit("strace not found: apt-get install strace, or --no-strace")
    worlds = args.worlds.split(",")
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        trees: dict[str, Path] = {}
        if args.against:
            trees[args.against] = stack.enter_context(exported(args.against))
        trees["this tree"] = ROOT
        envs = {
            args.against: dict(kv.split("=", 1) for kv in args.old_env),
            "this tree": dict(kv.split("=", 1) for kv in args.new_env),
        }
        servers: dict[str, tuple[str, int]] = {}
        for world in worlds:
            if world.startswith("nats"):
                from nats_server import nats_server_process

                sync = "always" if world == "nats-always" else None
                servers[world] = stack.enter_context(nats_server_process(sync))
            elif world != "local":
                raise SystemExit(f"unknown world {world!r}")
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wayline-steady-")))
        for rnd in range(args.rounds):
            for world in worlds:
                for i, (name, tree) in enumerate(trees.items()):
                    tag = f"r{rnd}t{i}x{os.getpid()}"
                    if world == "local":
                        url, pid = f"sqlite:///{tmp}/{tag}.db?sync={args.sync}", None
                    else:
                        base, pid = servers[world]
                        url = f"{base}?prefix={tag}"
                    figures = measure(
                        tree,
                        url,
                        args.steps,
                        args.runs,
                        pid,
                        strace,
                        args.at_once,
                        envs[name],
                        args.turns,
                    )
                    results.setdefault((name, world), []).append(figures)
                    shown = ", ".join(
                        f"{k} {v:.3g}"
                        for k, v in figures.items()
                        if not k.startswith(("syscalls: ", "callback: ", "turn: "))
                    )
                    print(f"[{rnd + 1}/{args.rounds}] {world} {name}: {shown}", flush=True)
    print(
        f"\nPer step: {args.runs} {'runs at once' if args.at_once else 'sequential runs'} of "
        f"{args.steps} no-op steps, "
        f"min-max over {args.rounds} round(s); SQLite sync={args.sync}."
        + (f" A/B: {args.against} (old) and this tree (new), alternating." if args.against else "")
        + (f" Old tree's env: {' '.join(args.old_env)}." if args.old_env else "")
        + (f" This tree's env: {' '.join(args.new_env)}." if args.new_env else "")
        + "\n"
    )
    print("\n".join(table(results, list(trees), worlds)))
    if args.write:
        from results import write_headline

        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "runtime"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_headline(
            [
                f"Written by `bench/steady.py` on {stamp}"
                f" at {head}{' (runtime changed since)' if dirty else ''}; {os.cpu_count()} cores, "
                f"load average at the end {load}. Per step: {args.runs} "
                f"{'runs at once' if args.at_once else 'sequential runs'} of "
                f"{args.steps} no-op steps, one worker in the client's process; min-max over "
                f"{args.rounds} round(s); SQLite sync={args.sync}."
                + (
                    f" A/B: {args.against} (old) and this tree (new) alternating, each ratio "
                    "new/old taken within its round."
                    if args.against
                    else ""
                ),
                "",
                *table(results, list(trees), worlds),
            ]
        )
        print("wrote the headline of bench/RESULTS.md")


if __name__ == "__main__":
    sys.path.append(str(HERE))
    main()
