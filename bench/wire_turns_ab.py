"""A/B of a NATS publish's send scheduling (``worlds/nats/wire.py``): the publish of 8aed637^1
(the turn's first publish schedules the turn's send) against this tree's (a publish written at
once on a quiet connection schedules nothing, and the connection counts as possibly still in
that turn until its reader hands over a message), in one process on one server, alternating
the two (old first in odd repetitions, new first in even ones). Run on 100 concurrent runs of
10 steps with the appends gathered (``gather_appends=1``) and not (``0``), and on a steady
stream of pairs of one-way publishes a turn (the case the change makes cost two sends a turn
instead of one).

    python bench/wire_turns_ab.py [--repeat 3] [--runs 100]

Needs git (the old ``wire.py`` is read with ``git show 8aed637^1:...``). Prints, per setting,
steps/s, sends (``writelines`` calls on the connection's transport) per step and atomic
batches per 1,000 steps, min-max over the repetitions, and the new/old ratio of steps/s taken
within each repetition.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import importlib.util
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

from flows import bench_chain
from gathered_appends import span
from nats_server import nats_server_process
from steps import burst

import wayline
from wayline.worlds.nats import wire

NEW_PUBLISH = wire.publish
OLD = "8aed637^1"


def old_wire() -> Any:
    text = subprocess.run(
        ["git", "show", f"{OLD}:runtime/wayline/worlds/nats/wire.py"],
        cwd=HERE.parent,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location("_wire_old", f.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


class Sends:
    """Counts ``write``/``writelines`` calls on every socket transport of the process (each
    a send, or a buffered write while the transport is paused)."""

    count = 0
    inside = False

    @classmethod
    def install(cls) -> None:
        from asyncio.selector_events import _SelectorSocketTransport as transport

        for name in ("writelines", "write"):
            original = getattr(transport, name)

            def counted(self: Any, data: Any, _original: Any = original) -> None:
                if cls.inside:  # writelines by way of write: one send
                    _original(self, data)
                    return
                cls.count += 1
                cls.inside = True
                try:
                    _original(self, data)
                finally:
                    cls.inside = False

            setattr(transport, name, counted)


async def appends(url: str, runs: int) -> dict[str, float]:
    world: Any = wayline.open_world(url)
    client = wayline.Client(world)
    async with world, wayline.Worker(world, [bench_chain]):
        await burst(client, runs)  # warm up
        gather = world._log.gather
        batches, before = gather.batches, Sends.count
        rate = await burst(client, runs)
        steps = runs * 10
        return {
            "steps/s": rate,
            "sends / step": (Sends.count - before) / steps,
            "atomic batches / 1,000 steps": (gather.batches - batches) * 1000 / steps,
        }


async def pairs(url: str, turns: int) -> dict[str, float]:
    """Two one-way publishes in each turn of the loop, ``turns`` turns in a row."""
    import nats

    nc = await nats.connect(url)
    try:
        before = Sends.count
        start = time.perf_counter()
        for i in range(turns):
            await wire.publish(nc, "ab.pairs", b"a%d" % i)
            await wire.publish(nc, "ab.pairs", b"b%d" % i)
            await asyncio.sleep(0)
        await nc.flush()
        elapsed = time.perf_counter() - start
        return {"pairs/s": turns / elapsed, "sends / turn": (Sends.count - before - 1) / turns}
    finally:
        await nc.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    old = old_wire()
    Sends.install()
    versions = {"old": old.publish, "new": NEW_PUBLISH}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with nats_server_process(None) as (base, _pid):
        cases = ["gather=1", "gather=0", "pairs"]
        got: dict[tuple[str, str], list[dict[str, float]]] = {}
        for rep in range(args.repeat):
            order = ("old", "new") if rep % 2 == 0 else ("new", "old")
            for case in cases:
                for name in order:
                    wire.publish = versions[name]  # type: ignore[assignment]
                    try:
                        if case == "pairs":
                            figures = await pairs(base, 20_000)
                        else:
                            prefix = f"ab{rep}{name}{case[-1]}x{os.getpid()}"
                            url = f"{base}?prefix={prefix}&gather_appends={case[-1]}"
                            figures = await appends(url, args.runs)
                    finally:
                        wire.publish = NEW_PUBLISH  # type: ignore[assignment]
                    got.setdefault((case, name), []).append(figures)
                    shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
                    print(f"rep {rep + 1} {case} {name}: {shown}", flush=True)
        for case in cases:
            for name in ("old", "new"):
                for key in got[(case, name)][0]:
                    values = [f[key] for f in got[(case, name)]]
                    print(f"{case} {name}: {key} {span(values)}", flush=True)
            key = "pairs/s" if case == "pairs" else "steps/s"
            ratios = [
                n[key] / o[key] for o, n in zip(got[(case, "old")], got[(case, "new")], strict=True)
            ]
            print(f"{case}: {key} new / old per repetition {span(ratios)}", flush=True)
    print(f"load average at end: {os.getloadavg()} ({time.strftime('%H:%M UTC', time.gmtime())})")


if __name__ == "__main__":
    asyncio.run(main())
