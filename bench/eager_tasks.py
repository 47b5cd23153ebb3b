"""What one body costs in CPU as an eager task (``wayline._engine.eager``) against a task the
loop makes, for a body that returns at once and for one that suspends three times.

    python bench/eager_tasks.py [--bodies 20000] [--rounds 5]

A step body runs in an eager task: its first step is taken when the task is made, and one
that ends there is read without a turn of the loop. The task is asyncio's pure-Python
``Task``, so every later step of a body that suspends runs Python where the C task runs C;
this says what that costs. Each round measures the four cases one after the other (process
CPU time per body, in microseconds), so the ratios are taken within a round; the figures
are min-max over the rounds.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "runtime"))

import argparse
import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from wayline._engine import eager

Body = Callable[[], Coroutine[Any, Any, int]]


async def _quick() -> int:
    return 1


async def _suspending() -> int:
    for _ in range(3):
        await asyncio.sleep(0)
    return 1


async def _by_the_loop(body: Body, bodies: int) -> float:
    loop = asyncio.get_running_loop()
    began = time.process_time()
    for _ in range(bodies):
        await loop.create_task(body())
    return (time.process_time() - began) / bodies * 1e6


async def _eagerly(body: Body, bodies: int) -> float:
    began = time.process_time()
    for _ in range(bodies):
        task = eager.start(body())
        if task.done():
            task.result()
        else:
            await task
    return (time.process_time() - began) / bodies * 1e6


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


async def main(bodies: int, rounds: int) -> None:
    cases = {
        "returns at once": _quick,
        "suspends 3 times": _suspending,
    }
    for name, body in cases.items():
        by_loop, eager_ = [], []
        for _ in range(rounds):  # alternating, so the ratio is taken within a round
            by_loop.append(await _by_the_loop(body, bodies))
            eager_.append(await _eagerly(body, bodies))
        ratios = [e / b for e, b in zip(eager_, by_loop, strict=True)]
        sys.stdout.write(f"| {name} | {_span(by_loop)} | {_span(eager_)} | {_span(ratios)} |\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bodies", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.stdout.write(
        "| body | µs CPU, loop task | µs CPU, eager task | ratio eager/loop |\n|---|---|---|---|\n"
    )
    asyncio.run(main(args.bodies, args.rounds))
