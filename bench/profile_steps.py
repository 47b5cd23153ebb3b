"""Where the CPU of a step goes: a cProfile of the client and worker process over a few hundred
runs of no-op steps, the top functions by their own time (``tottime``), per world.

    python bench/profile_steps.py [--worlds local,nats] [--runs 300] [--steps 10] [--top 25]
        [--tree FOLDER] [--modules N]

``--tree`` profiles the ``runtime`` of another checkout (``git archive COMMIT runtime | tar
-x -C FOLDER``), this tree's by default.

The setup is ``bench/steady.py``'s: one worker in the client's process (an embedded
deployment), warmed up by a few runs, then ``--runs`` sequential runs of ``--steps`` no-op
steps profiled. The codec and the event loop are the process's own choice
(``WAYLINE_CODEC``, ``WAYLINE_LOOP``; see docs/performance.md), so the same script profiles
each. cProfile adds its own cost per call, so its shares are of a slower process than an
untraced one: read them as where the time goes, not as what a step costs
(``bench/steady.py`` says that). ``--modules N`` adds the own time of wayline's top N modules
and of each of its packages (``_core``, ``_engine``, ``worlds``...).
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))


async def profiled(url: str, runs: int, steps: int, top: int, modules: int) -> str:
    from flows import bench_chain

    import wayline

    world = wayline.open_world(url)
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [bench_chain]):
        for _ in range(5):  # warm up: imports, caches, the first run's setup
            await (await client.start(bench_chain, steps)).result(timeout=120)
        profile = cProfile.Profile()
        cpu = time.process_time()
        profile.enable()
        for _ in range(runs):
            await (await client.start(bench_chain, steps)).result(timeout=120)
        profile.disable()
        cpu = time.process_time() - cpu
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    total = stats.total_tt  # type: ignore[attr-defined]
    head = (
        f"{runs} runs x {steps} steps; profiled CPU {cpu * 1000 / (runs * steps):.3f} ms a step "
        f"(cProfile's total {total * 1000 / (runs * steps):.3f} ms a step)\n\n"
        + shares(stats)
        + "\n"
        + (module_shares(stats, modules) + "\n" if modules else "")
    )
    return head + out.getvalue()


GROUPS = [
    ("waiting in epoll (not CPU)", ("method 'poll' of 'select.epoll'", "method 'select' of")),
    ("JSON codec", ("/json/", "_json.", "orjson", "msgspec")),
    ("SQLite calls", ("sqlite3.",)),
    ("socket calls", ("_socket.socket",)),
    ("nats-py", ("site-packages/nats/",)),
    ("event loop and tasks (asyncio, uvloop)", ("/asyncio/", "uvloop", "selectors.py")),
    ("wayline", ("/wayline/",)),
]


def shares(stats: pstats.Stats) -> str:
    """Own time by group, as shares of the profile's time outside epoll's wait."""
    sums: dict[str, float] = dict.fromkeys([g for g, _ in GROUPS] + ["other"], 0.0)
    for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename}:{name}"
        group = next((g for g, keys in GROUPS if any(k in where for k in keys)), "other")
        sums[group] += row[2]
    waiting = sums.pop(GROUPS[0][0])
    busy = sum(sums.values()) or 1.0
    lines = ["| own time in | share |", "|---|---|"]
    lines += [f"| {g} | {v / busy:.0%} |" for g, v in sorted(sums.items(), key=lambda x: -x[1])]
    lines.append(f"| (epoll's wait, left out of the shares: {waiting / busy:.0%} of the rest) | |")
    return "\n".join(lines) + "\n"


def module_shares(stats: pstats.Stats, top: int) -> str:
    """Own time per module of wayline (``_core.planning``, ``_engine.handler``...), as shares of
    the profile's time outside epoll's wait: where a compiler of Python (mypyc) could help."""
    sums: Counter[str] = Counter()
    busy = 0.0
    for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if any(k in f"{filename}:{name}" for k in GROUPS[0][1]):
            continue
        busy += row[2]
        _, found, rest = filename.partition("/wayline/")
        if found and rest.endswith(".py"):
            sums[rest.removesuffix(".py").replace("/", ".")] += row[2]
    busy = busy or 1.0
    lines = ["| own time in wayline module | share |", "|---|---|"]
    lines += [f"| {m} | {v / busy:.1%} |" for m, v in sums.most_common(top)]
    rest = sum(sums.values()) - sum(v for _, v in sums.most_common(top))
    lines.append(f"| the other {max(len(sums) - top, 0)} modules | {rest / busy:.1%} |")
    groups: Counter[str] = Counter()
    for m, v in sums.items():
        groups[m.split(".")[0] if "." in m else "(top level)"] += v
    lines += ["", "| own time in wayline package | share |", "|---|---|"]
    lines += [f"| {g} | {v / busy:.1%} |" for g, v in groups.most_common()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--tree", default=str(HERE.parent))
    parser.add_argument("--modules", type=int, default=0, help="also the top N wayline modules")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.tree).resolve() / "runtime"))
    import wayline

    print(f"wayline from {Path(wayline.__file__).parent}\n")
    loop_name = os.environ.get("WAYLINE_LOOP", "asyncio")

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wayline-prof-")))
        for world in args.worlds.split(","):
            if world == "local":
                url = f"sqlite:///{tmp}/prof.db?sync=normal"
            else:
                from nats_server import nats_server_process

                base, _ = stack.enter_context(nats_server_process())
                url = f"{base}?prefix=prof"
            loop: asyncio.AbstractEventLoop
            if loop_name == "uvloop":  # not wayline.loops: an older tree has none
                import uvloop

                loop = uvloop.new_event_loop()
            else:
                loop = asyncio.new_event_loop()
            try:
                report = loop.run_until_complete(
                    profiled(url, args.runs, args.steps, args.top, args.modules)
                )
            finally:
                loop.close()
            print(f"### {world} ({type(loop).__module__}.{type(loop).__name__})\n")
            print(report)


if __name__ == "__main__":
    main()
