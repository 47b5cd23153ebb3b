"""How often a worker hands back a delivery held over a paused run, for a given held delay:
``python bench/held_handbacks.py``.

    python bench/held_handbacks.py [--delays 0.001,0.1,0.2,2] [--behind 0,10] [--window 5]
                                   [--worlds local,nats] [--rounds 2] [--waits 0]

For each world, clock lag and held delay (the delays alternating within a round), a worker runs
a step whose body never ends and is stopped without grace inside it; the run is paused, and a
new worker, whose world reads a clock ``--behind`` seconds behind the one that stamped the pause
(a worker whose clock lags the NATS server's and which has made no append since it started, so
its world has no sample of the lag; on SQLite, a host whose clock was set back), takes the dead
owner's redelivery. With ``--waits N`` it first hands the delivery back N times as a step
waiting for a concurrency slot does (``world.release`` with no delay, no ``held``). It then hands
the delivery back, since the pause holds its step, for ``planning.held_delay`` of the pause's
age, at least the held delay. Counted over ``--window``
seconds from the first hand-back: the hand-backs, the CPU seconds of this process (the worker)
and of the nats-server, and the highest delivery attempt a hand-back saw (a hand-back that
counted as a delivery would raise it), and the first held hand-back's delay. The run is then
unpaused and must complete: the seconds from the unpause to its result are how late it resumed.

The held delay is set on the settings object after it is built, so that values the settings
refuse (below the floor, ``HELD_DELAY_FLOOR``) can be measured too.
"""

# ruff: noqa: E402, ASYNC110, ASYNC240 - sys.path is fixed before the imports (see
# bench/operator.py); a benchmark's polls of a marker file and a list are its own business

from __future__ import annotations

import sys

# run as ``python bench/held_handbacks.py``, bench/ is first on the path and its operator.py
# the operator module for every import below: take it off the path first
sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nats_server import machine, nats_server_process

import wayline
from wayline._engine import handler as handler_module
from wayline._engine.messages import Verdict
from wayline.world import World

VISIBILITY = 1.0
"""The worlds' visibility: the dead owner's delivery comes back after it."""


@wayline.step
async def held_bench_step(path: str) -> int:
    if wayline.step_context().attempt == 1:
        Path(path).touch()
        await asyncio.sleep(3600)  # the owner is stopped in here
    return 1


@wayline.workflow(name="bench-held-handbacks")
async def held_bench_flow(path: str) -> int:
    return await held_bench_step(path)


def _cpu(pid: int | None) -> float:
    """CPU seconds of process ``pid`` (user + system), or of this process."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _open(kind: str, where: str, prefix: str) -> World:
    if kind == "local":
        return wayline.LocalWorld(Path(where) / "wayline.db", visibility_seconds=VISIBILITY)
    from wayline.worlds.nats import NatsWorld

    return NatsWorld(where, prefix=prefix, visibility_seconds=VISIBILITY)


async def one(
    kind: str,
    where: str,
    server: int | None,
    delay: float,
    behind: float,
    window: float,
    waits: int = 0,
) -> dict[str, Any]:
    prefix = f"hb{uuid.uuid4().hex[:10]}"
    marker = Path(tempfile.mkdtemp(prefix="wayline-held-")) / f"{prefix}.started"
    first = _open(kind, where, prefix)
    await first.start()
    second: World | None = None
    try:
        client = wayline.Client(first)
        owner = wayline.Worker(first, [held_bench_flow])
        await owner.start()
        handle = await client.start(held_bench_flow, str(marker))
        while not marker.exists():
            await asyncio.sleep(0.02)
        await owner.close(graceful=False)  # the owner dies mid-body
        assert await client.pause(handle.run_id, "held hand-backs bench")
        second = _open(kind, where, prefix)
        await second.start()
        real_now = second.now
        second.now = lambda: real_now() - behind  # type: ignore[method-assign]
        settings = wayline.Settings.from_env({})
        object.__setattr__(settings, "held_delay_seconds", delay)  # below the floor too
        handed: list[tuple[float, int]] = []
        hand_back = handler_module.Handler._hand_back_held
        given = handler_module.held_delay
        delays: list[float] = []
        waited: list[int] = []

        async def counting(self: Any, run_id: str, delivery: Any, paused_at: Any) -> Any:
            if len(waited) < waits:  # handed back as a step waiting for a slot is
                waited.append(delivery.attempt)
                await self.world.release(delivery, 0.0)
                return Verdict("none")
            handed.append((time.monotonic(), delivery.attempt))
            return await hand_back(self, run_id, delivery, paused_at)

        def noting(*args: Any) -> float:
            delays.append(given(*args))
            return delays[-1]

        handler_module.Handler._hand_back_held = counting  # type: ignore[method-assign]
        handler_module.held_delay = noting
        try:
            async with wayline.Worker(second, [held_bench_flow], settings=settings):
                while not handed:
                    await asyncio.sleep(0.005)
                cpu, server_cpu = _cpu(None), _cpu(server) if server else 0.0
                began = handed[0][0]
                await asyncio.sleep(window - (time.monotonic() - began))
                cpu, server_cpu = _cpu(None) - cpu, (_cpu(server) - server_cpu if server else 0.0)
                within = [a for t, a in handed if t - began < window]
                unpaused = time.monotonic()
                assert await client.unpause(handle.run_id)
                assert await handle.result(timeout=60) == 1
                resume = time.monotonic() - unpaused
        finally:
            handler_module.Handler._hand_back_held = hand_back  # type: ignore[method-assign]
            handler_module.held_delay = given
        return {
            "handbacks": len(within),
            "cpu": cpu,
            "server_cpu": server_cpu,
            "attempt": max(within + waited),
            "first": delays[0],
            "resume": resume,
        }
    finally:
        if second is not None:
            await second.close()
        await first.close()
        with contextlib.suppress(OSError):
            marker.unlink()
            marker.parent.rmdir()


@contextlib.contextmanager
def _where(kind: str) -> Iterator[tuple[str, int | None]]:
    if kind == "local":
        with tempfile.TemporaryDirectory(prefix="wayline-bench-held-") as folder:
            yield folder, None
        return
    with nats_server_process() as (url, pid):
        yield url, pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", default="0.001,0.1,0.2,2", help="held delays, seconds")
    parser.add_argument("--behind", default="0,10", help="clock lags of the worker, seconds")
    parser.add_argument("--window", type=float, default=5.0, help="seconds counted")
    parser.add_argument("--worlds", default="local,nats")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--waits", type=int, default=0, help="slot waits before the pause's")
    args = parser.parse_args()
    delays = [float(d) for d in args.delays.split(",")]
    lags = [float(b) for b in args.behind.split(",")]
    print(machine())
    figures: dict[tuple[str, float, float], list[dict[str, Any]]] = {}
    for kind in args.worlds.split(","):
        with _where(kind) as (where, server):
            for r in range(args.rounds):
                for behind in lags:
                    order = delays if r % 2 == 0 else delays[::-1]
                    for delay in order:
                        got = asyncio.run(
                            one(kind, where, server, delay, behind, args.window, args.waits)
                        )
                        figures.setdefault((kind, behind, delay), []).append(got)
                        print(kind, f"behind {behind:g}s", f"delay {delay:g}s", got, flush=True)
    print(machine())
    print()
    print(
        f"| world | clock behind | held delay | hand-backs in {args.window:g} s | "
        "worker CPU s | nats-server CPU s | highest attempt | first held hand-back s | "
        "unpause to result s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (kind, behind, delay), rows in figures.items():

        def span(key: str, fmt: str, rows: list[dict[str, Any]] = rows) -> str:
            low, high = min(r[key] for r in rows), max(r[key] for r in rows)
            shown = f"{low:{fmt}}", f"{high:{fmt}}"
            return shown[0] if shown[0] == shown[1] else f"{shown[0]}-{shown[1]}"

        server = span("server_cpu", ".2f") if kind == "nats" else "-"
        print(
            f"| {kind} | {behind:g} s | {delay:g} s | {span('handbacks', 'd')} | "
            f"{span('cpu', '.2f')} | {server} | {span('attempt', 'd')} | "
            f"{span('first', '.2f')} | {span('resume', '.1f')} |"
        )


if __name__ == "__main__":
    main()
