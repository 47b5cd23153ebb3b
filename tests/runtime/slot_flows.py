"""Workflows whose steps have concurrency limits (``test_step_concurrency`` and the SIGKILL
test in ``tests/faults``). Every body writes ``start TAG PID`` and ``end TAG PID`` lines, so a
test counts how many ran at once and how often each ran."""

from __future__ import annotations

import asyncio
import os
import time

import wayline
from tests.runtime.flows import lines, mark

LEASE = 3.0


@wayline.step(name="slot_flows.render", concurrency=wayline.Limit(max=2, lease=LEASE))
async def render(path: str, tag: str, seconds: float) -> str:
    mark(path, f"start {tag} {os.getpid()}")
    await asyncio.sleep(seconds)
    mark(path, f"end {tag} {os.getpid()}")
    return tag


@wayline.workflow(name="slot_flows.render_one")
async def render_one(path: str, tag: str, seconds: float) -> str:
    return await render(path, tag, seconds)


@wayline.step(
    name="slot_flows.in_region",
    concurrency=wayline.Limit(key=lambda path, region, tag: region, max=1, lease=LEASE),
)
async def in_region(path: str, region: str, tag: str) -> str:
    mark(path, f"start {region}/{tag} {os.getpid()}")
    await asyncio.sleep(0.3)
    mark(path, f"end {region}/{tag} {os.getpid()}")
    return tag


@wayline.workflow(name="slot_flows.regional")
async def regional(path: str, region: str, tag: str) -> str:
    return await in_region(path, region, tag)


def most_at_once(path: str, prefix: str = "") -> int:
    """The most bodies (whose tag starts with ``prefix``) running at once, by the markers; a
    ``killed PID`` line ends every body of that process."""
    live: set[tuple[str, str]] = set()
    most = 0
    for line in lines(path):
        what, *rest = line.split()
        if what == "killed":
            live = {b for b in live if b[1] != rest[0]}
            continue
        tag, pid = rest
        if not tag.startswith(prefix):
            continue
        if what == "start":
            live.add((tag, pid))
            most = max(most, len(live))
        else:
            live.discard((tag, pid))
    return most


def runs_of(path: str, tag: str) -> int:
    """How many bodies of ``tag`` started."""
    return sum(1 for line in lines(path) if line.split()[:2] == ["start", tag])


@wayline.step(
    name="slot_flows.solo",
    concurrency=wayline.Limit(max=1, lease="60s"),
    retry_delay=0.1,
)
async def solo(path: str, tag: str) -> str:
    mark(path, f"start {tag} {os.getpid()}")
    hang = tag == "slow" and wayline.step_context().attempt == 1
    try:
        await asyncio.sleep(30 if hang else 0.1)  # the first slow attempt outlives the bound
    finally:
        mark(path, f"end {tag} {os.getpid()}")  # also when the body is cut off
    return tag


@wayline.workflow(name="slot_flows.solo_one")
async def solo_one(path: str, tag: str) -> str:
    return await solo(path, tag)


@wayline.step(name="slot_flows.renewed", concurrency=wayline.Limit(max=1, lease=0.3))
async def renewed(marker: str) -> str:
    """Runs until ``marker`` exists (a test makes it from inside a renewal of the slot)."""
    while not os.path.exists(marker):  # noqa: ASYNC110, ASYNC240 - a tiny local marker file
        await asyncio.sleep(0.01)
    return "done"


@wayline.workflow(name="slot_flows.renewed_one")
async def renewed_one(marker: str) -> str:
    return await renewed(marker)


@wayline.step(
    name="slot_flows.held",
    concurrency=wayline.Limit(key="one", max=1, lease=LEASE),
    retry_delay=0.1,
)
async def held(path: str, tag: str, seconds: float) -> str:
    """Holds the one slot for ``seconds``; writes ``start``/``end`` (or ``cut``, when the body
    is cut off) lines with the attempt and this process's monotonic clock, which every worker
    of an in-process test shares."""
    attempt = wayline.step_context().attempt
    mark(path, f"start {tag} {attempt} {time.monotonic():.6f}")
    how = "cut"
    try:
        await asyncio.sleep(seconds if attempt == 1 else 0.1)
        how = "end"
    finally:
        mark(path, f"{how} {tag} {attempt} {time.monotonic():.6f}")
    return f"{tag} attempt {attempt}"


@wayline.workflow(name="slot_flows.held_one")
async def held_one(path: str, tag: str, seconds: float) -> str:
    return await held(path, tag, seconds)


@wayline.step(
    name="slot_flows.held_sync",
    concurrency=wayline.Limit(key="one", max=1, lease=LEASE),
    retry_delay=0.1,
)
def held_sync(path: str, tag: str, seconds: float) -> str:
    """``held`` as a sync body, in its thread, which no cancel reaches. CLOCK_MONOTONIC is one
    clock for every process of the machine, so its lines compare with another process's."""
    attempt = wayline.step_context().attempt
    mark(path, f"start {tag} {attempt} {time.monotonic():.6f}")
    time.sleep(seconds if attempt == 1 else 0.1)
    mark(path, f"end {tag} {attempt} {time.monotonic():.6f}")
    return f"{tag} attempt {attempt}"


@wayline.workflow(name="slot_flows.held_sync_one")
async def held_sync_one(path: str, tag: str, seconds: float) -> str:
    return await held_sync(path, tag, seconds)


@wayline.step(
    name="slot_flows.redelivered", concurrency=wayline.Limit(key="one", max=1, lease="30s")
)
async def redelivered(path: str, tag: str, seconds: float) -> str:
    """Holds the one slot for ``seconds`` in every attempt; writes ``held``'s lines (``end``
    also when the body is cut off)."""
    attempt = wayline.step_context().attempt
    mark(path, f"start {tag} {attempt} {time.monotonic():.6f}")
    try:
        await asyncio.sleep(seconds)
    finally:
        mark(path, f"end {tag} {attempt} {time.monotonic():.6f}")
    return f"{tag} attempt {attempt}"


@wayline.workflow(name="slot_flows.redelivered_one")
async def redelivered_one(path: str, tag: str, seconds: float) -> str:
    return await redelivered(path, tag, seconds)


def spans(path: str, died: float | None = None) -> list[tuple[float, float, str]]:
    """(start, stop, "TAG ATTEMPT HOW") of every body of ``held``, by their lines; a body that
    has no stop line stops at ``died`` (when its process was seen dead) or, alive, now."""
    open_: dict[str, float] = {}
    out: list[tuple[float, float, str]] = []
    for line in lines(path):
        what, tag, attempt, at = line.split()
        if what == "start":
            open_[f"{tag} {attempt}"] = float(at)
        else:
            out.append((open_.pop(f"{tag} {attempt}"), float(at), f"{tag} {attempt} {what}"))
    stop, how = (time.monotonic(), "running") if died is None else (died, "died")
    out += [(start, stop, f"{body} {how}") for body, start in open_.items()]
    return sorted(out)


def overlaps(path: str, died: float | None = None) -> list[tuple[str, str, float]]:
    """Every pair of ``held`` bodies that ran at the same time, with how long they did."""
    found = []
    bodies = spans(path, died)
    for i, (start, stop, what) in enumerate(bodies):
        for other_start, other_stop, other in bodies[i + 1 :]:
            both = min(stop, other_stop) - max(start, other_start)
            if both > 0:
                found.append((what, other, round(both, 3)))
    return found
