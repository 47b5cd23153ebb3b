"""The chaos workload: runs of a multi-step workflow whose step bodies count their executions
in this process, and the figures read back from the runs' event logs after a fault.

Every worker of a chaos scenario runs in the harness's process, so each body's start and end
are on one clock (wall time, comparable with the world's event stamps on the same machine).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import wayline
from wayline._core.events import EventType, RunStatus


@dataclass
class Execution:
    """One execution of one step body: the n-th in its list is the body's n-th attempt."""

    started: float
    ended: float | None = None


EXECUTIONS: dict[tuple[str, int], list[Execution]] = defaultdict(list)
"""(run label, step index) -> every execution of that step's body, in start order."""


@wayline.step
async def counted_step(label: str, i: int, seconds: float) -> int:
    execution = Execution(time.time())
    EXECUTIONS[label, i].append(execution)
    await asyncio.sleep(seconds)
    execution.ended = time.time()
    return i


@wayline.workflow
async def chaos_run(label: str, steps: int, seconds: float) -> int:
    total = 0
    for i in range(steps):
        total += await counted_step(label, i, seconds)
    return total


def expected(steps: int) -> int:
    return sum(range(steps))


@dataclass
class Figures:
    """What one fault did to one workload. ``lost``: runs started that did not complete and are
    not stuck (gone, failed or cancelled). ``stuck``: runs not ended by the bound after the
    fault (this workload never waits, so a run not ended is not visibly waiting).
    ``reruns``: step bodies started after the log had recorded that step's completion."""

    fault: str
    started: int = 0
    completed: int = 0
    lost: int = 0
    stuck: int = 0
    reruns: int = 0
    moving_again: float = 0.0
    """Seconds from the fault's end until every run not yet ended then had moved: a step body
    started, or an event appended to its log."""
    all_complete: float = 0.0
    """Seconds from the fault's end until every run had ended."""
    notes: list[str] = field(default_factory=list)


def body_starts_after(labels: list[str], steps: int, since: float) -> dict[str, float]:
    """Each run's first step body started after ``since``."""
    firsts: dict[str, float] = {}
    for label in labels:
        starts = [
            e.started for i in range(steps) for e in EXECUTIONS[label, i] if e.started > since
        ]
        if starts:
            firsts[label] = min(starts)
    return firsts


def reruns_after_completion(label: str, steps: int, events: list[Any]) -> int:
    """Bodies of a step started after the log had recorded that step's completion. The
    workflow runs its steps one after another, so the n-th distinct completed correlation id
    is step n."""
    completed: list[float] = []
    seen: set[str | None] = set()
    for event in events:
        if event.type == EventType.STEP_COMPLETED and event.correlation_id not in seen:
            seen.add(event.correlation_id)
            completed.append(event.created_at)
    return sum(
        1
        for i, recorded in enumerate(completed[:steps])
        for execution in EXECUTIONS[label, i]
        if execution.started > recorded
    )


async def read_back(
    client: wayline.Client,
    handles: dict[str, Any],
    steps: int,
    healed: float,
    bound: float,
    figures: Figures,
) -> None:
    """Wait up to ``bound`` seconds after the fault's end (``healed``, wall time) for every run
    to end, then fill ``figures`` from the runs' logs and the bodies' counts."""
    ended: dict[str, float] = {}
    open_at_heal: set[str] = set(handles)
    deadline = time.monotonic() + bound
    while len(ended) < len(handles) and time.monotonic() < deadline:
        for label, handle in handles.items():
            if label in ended:
                continue
            try:
                info = await client.get_run(handle.run_id)
            except Exception as err:
                figures.notes.append(f"read {label}: {type(err).__name__}")
                continue
            if info.status.terminal:
                ended[label] = info.ended_at if info.ended_at else time.time()
                if ended[label] <= healed:
                    open_at_heal.discard(label)
        await asyncio.sleep(0.2)
    figures.started = len(handles)
    outcomes: dict[str, RunStatus | None] = {}
    progress: dict[str, float] = {}  # each run's first event recorded after the fault's end
    for label, handle in handles.items():
        try:
            info = await client.get_run(handle.run_id)
            outcomes[label] = info.status
            if info.status == RunStatus.COMPLETED and info.output != expected(steps):
                figures.notes.append(f"{label}: wrong result {info.output!r}")
                outcomes[label] = RunStatus.FAILED
            events = await handle.events()
            figures.reruns += reruns_after_completion(label, steps, events)
            after = [e.created_at for e in events if e.created_at > healed]
            if after:
                progress[label] = min(after)
        except Exception as err:
            figures.notes.append(f"{label}: {type(err).__name__}: {err}")
            outcomes[label] = None
    figures.completed = sum(1 for s in outcomes.values() if s == RunStatus.COMPLETED)
    figures.stuck = sum(1 for s in outcomes.values() if s is not None and not s.terminal)
    figures.lost = figures.started - figures.completed - figures.stuck
    waiting = sorted(open_at_heal)
    moved = body_starts_after(waiting, steps, healed)
    again = [
        min(moved.get(label, float("inf")), ended.get(label, float("inf"))) for label in waiting
    ]
    figures.moving_again = max([0.0, *(t - healed for t in again)])
    figures.all_complete = max([0.0, *(t - healed for t in ended.values())])
    if figures.stuck:
        figures.moving_again = figures.all_complete = float("inf")
