"""The e2e suite's workflows, run by the worker pods: the suite puts this file in a ConfigMap
mounted at /e2e and the chart's workers load it with ``--app /e2e/flows.py``.

``slow`` and ``paced`` leave a marker file per body start and per body end on a shared volume
(``/marks``), named by the pod that ran it, with the wall-clock time inside: the suite counts
how many times a body really ran, where, and when.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import wayline

MARKS = Path(os.environ.get("E2E_MARKS", "/marks"))


def _mark(key: str, what: str) -> None:
    pod = socket.gethostname()
    (MARKS / f"{key}.{what}.{pod}.{time.time_ns()}").write_text(f"{time.time():.3f}")


@wayline.step(name="e2e.slow")
def slow(key: str, seconds: float) -> str:
    _mark(key, "start")
    time.sleep(seconds)
    _mark(key, "end")
    return f"{key} done"


@wayline.workflow
async def marked(key: str, seconds: float) -> str:
    """One slow inline step: the body the suite interrupts."""
    return await slow(key, seconds)


@wayline.step(name="e2e.add")
def add(total: int, value: int) -> int:
    return total + value


@wayline.workflow
async def quick(key: str) -> str:
    """A run that finishes at once (a step, no wait)."""
    return f"{key}={await add(0, 1)}"


@wayline.workflow
async def steady(rounds: int) -> int:
    """Live for a while: a step and a durable sleep per round."""
    total = 0
    for value in range(rounds):
        total = await add(total, value)
        await wayline.sleep("2s")
    return total


@wayline.step(name="e2e.paced")
async def paced(key: str, seconds: float) -> str:
    _mark(key, "start")
    await asyncio.sleep(seconds)
    _mark(key, "end")
    return key


@wayline.workflow
async def stepped(key: str, steps: int, seconds: float) -> int:
    """``steps`` marked steps of ``seconds`` each, keyed ``<key>-<i>``: a run whose bodies keep
    ending, so one ends during any outage of the world. Async, so that many runs' bodies run at
    once on a worker instead of queueing for threads."""
    for i in range(steps):
        await paced(f"{key}-{i}", seconds)
    return steps


@wayline.step(name="e2e.burst.work")
async def burst_work(value: int) -> int:
    # Long enough that a burst of 500 outlasts a pod's start on a loaded machine: a worker
    # holds about 50 such bodies at once, so one replica alone would take about 30 s.
    await asyncio.sleep(3.0)
    return value


@wayline.workflow(name="e2e.burst")
async def burst(value: int) -> int:
    """One short step: the run of a burst of hundreds that scales a WorkflowWorker up and back."""
    return await burst_work(value)


@wayline.step(name="e2e.held.work", timeout="300s")
async def held_work(key: str, seconds: float) -> str:
    """At least ``seconds``, then until the suite writes ``gate-<key>`` on the shared volume (a
    name the marks' ``<key>.*`` globs do not match): the test decides when this load ends. A
    step with a timeout runs as its own step delivery, renewed while its body runs, so it may
    last longer than the suite's 12 s invocation bound (docs/ownership.md)."""
    _mark(key, "start")
    await asyncio.sleep(seconds)
    # A file written from another process, so it is polled: no event of this loop can say it.
    while not (MARKS / f"gate-{key}").exists():  # noqa: ASYNC110
        await asyncio.sleep(0.5)
    _mark(key, "end")
    return key


@wayline.workflow(name="e2e.held")
async def held(key: str, seconds: float) -> str:
    """One marked step its worker holds as one delivery throughout, for at least ``seconds``
    and until its gate opens: a run whose pod a scale-down must keep until the step is done."""
    return await held_work(key, seconds)
