"""Runs that race for one hook token (issue #35).

Two or three runs of ``sim.contender`` create a hook with one shared token, so the world
refuses the decision batch of every run but the one that holds it (``HOOK_CONFLICT``), and the
planner's ``fail_move`` ends the refused run: at once when it has nothing to reverse, by an
unwind when it completed ``sim.charge`` (whose compensation is ``sim.refund``) or has a
child (``sim.lingerer``) still live. Each contender sets an attribute just before the hook, so
the refused batch carries it. A client resumes the token from racing clients under one
delivery id.

The invariants (:func:`check`): a run refused with ``HOOK_CONFLICT`` ends failed with that
code, in one terminal event; each of its completed ``sim.charge`` steps is reversed once and
no step that did not complete is; its refused batch's attribute is recorded once. The
probe's own checks cover the rest (a delivery id received once per hook, no run left neither
ended nor visibly waiting, no compensation of a body that never ran).

The plan comes from a generator of its own, seeded from the seed's number, and a seed that
draws no contenders starts nothing more: its history is what it was without them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import child, create_hook, set_attributes, sleep, workflow
from .._core.events import RUN_TERMINAL_EVENTS, Event, EventType, RunStatus
from ..client import Client
from ..errors import HookNotFoundError, WaylineError
from ..worlds.memory import MemoryStore
from .trace import Trace
from .workload import HOOK_TIMEOUT, charge

CONFLICT_ODDS = 0.25
"""How likely a seed runs contenders for a shared hook token."""
CONTENDER = "sim.contender"
OPERATOR_PERIOD = 10.0
"""Virtual seconds between two looks of the person at a contender with a child."""
OPERATOR_ROUNDS = 60
"""Looks before the person gives up (ten minutes: the child lives 30 s)."""
MARK = "contender"
"""The attribute each contender sets in the batch that creates its hook."""

Shape = Literal["bare", "steps", "child"]
SHAPES: tuple[Shape, ...] = ("bare", "steps", "child")


@workflow(name="sim.lingerer")
async def lingerer(tag: str) -> str:
    await sleep("30s")  # live while its parent creates the hook
    return tag


@workflow(name=CONTENDER)
async def contender(tag: str, token: str, shape: str) -> str:
    kid = child(lingerer, tag) if shape == "child" else None
    if shape != "bare":
        await charge(tag)
    set_attributes(**{MARK: tag})
    await create_hook(token, timeout=HOOK_TIMEOUT, type=dict)
    if kid is not None:
        await kid
    return tag


@dataclass(frozen=True, slots=True)
class ConflictPlan:
    token: str = ""
    starts: tuple[tuple[float, Shape], ...] = ()
    """When each contender starts (virtual seconds) and its shape; none: no contenders."""
    resumes: tuple[float, ...] = ()
    """When each racing client starts resuming the token (one delivery id for all)."""

    @classmethod
    def draw(cls, seed: int) -> ConflictPlan:
        rng = random.Random(f"wayline-sim-conflict-{seed}")
        if rng.random() >= CONFLICT_ODDS:
            return cls()
        starts = tuple(
            (rng.uniform(0.0, 10.0), rng.choice(SHAPES)) for _ in range(rng.randint(2, 3))
        )
        resumes = tuple(rng.uniform(0.0, 30.0) for _ in range(rng.randint(1, 3)))
        return cls(f"shared:{seed}", starts, resumes)


async def drive(client: Client, plan: ConflictPlan, trace: Trace) -> None:
    """Start the contenders at their times, and resume the shared token from racing clients."""

    async def one(after: float, i: int, shape: Shape) -> None:
        await asyncio.sleep(after)
        handle = await client.start(contender, f"c{i}", plan.token, shape)
        trace.note(f"client started contender c{i} ({shape}) as {handle.run_id[-6:]}")
        if shape == "child":
            await _operate(client, handle.run_id, trace)

    async def resume(after: float) -> None:
        await asyncio.sleep(after)
        for _ in range(60):  # until a contender has created the hook
            try:
                await client.resume_hook(plan.token, {"ok": True}, delivery_id="d1")
                trace.note(f"client resumed {plan.token}")
                return
            except HookNotFoundError:
                await asyncio.sleep(2.0)
            except WaylineError as err:
                trace.note(f"client resume of {plan.token} refused: {err.code}")
                return

    await asyncio.gather(
        *(one(after, i, shape) for i, (after, shape) in enumerate(plan.starts)),
        *(resume(after) for after in plan.resumes),
    )


async def _operate(client: Client, run_id: str, trace: Trace) -> None:
    """The person who resumes the unwind of a refused contender that parked on its live child
    (a failed run does not stop a child it did not ask to stop: docs/durability.md, "Child
    runs"); a resume before the child ended parks the run again, and the person tries later."""
    for _ in range(OPERATOR_ROUNDS):
        await asyncio.sleep(OPERATOR_PERIOD)
        try:
            info = await client.get_run(run_id)
            if info.status.terminal:
                return
            if info.status is RunStatus.COMPENSATION_STUCK:
                resumed = await client.resume_compensation(run_id)
                trace.note(f"client resumed the unwind of {run_id[-6:]}: {resumed}")
        except WaylineError as err:  # the store did not answer, or the run moved on
            trace.note(f"client resume of the unwind of {run_id[-6:]} refused: {err.code}")


def check(store: MemoryStore, trace: Trace, violate: Callable[[str], None]) -> None:
    """The invariants of the runs refused a hook token, read from their logs; the trace says
    how each contender ended, so that a range of seeds shows the refusals happen."""
    for run_id, log in sorted(store.logs.items()):
        if log and log[0].data.get("workflow") == CONTENDER:
            ends = [
                f"{e.type.value} {_code(e) or ''}".strip()
                for e in log
                if e.type in RUN_TERMINAL_EVENTS
            ]
            trace.note(f"contender {run_id[-6:]} ended: {', '.join(ends) or 'not'}")
            check_contender(run_id, log, violate)


def _code(e: Event) -> Any:
    error = e.data.get("error")
    return error.get("code") if isinstance(error, dict) else None


def check_contender(run_id: str, log: Sequence[Event], violate: Callable[[str], None]) -> None:
    """A refused contender ends failed with ``HOOK_CONFLICT`` once, reverses each completed
    step once and no other, and records its refused batch's attribute once."""
    short = run_id[-6:]
    refused = [e for e in log if _code(e) == "HOOK_CONFLICT"]
    marks = [e for e in log if e.type is EventType.ATTRIBUTES_SET and MARK in e.data.get("set", {})]
    if len(marks) > 1:
        violate(f"contender {short} recorded its attribute {len(marks)} times")
    if not refused:
        return
    ends = [e for e in log if e.type in RUN_TERMINAL_EVENTS]
    if (
        len(ends) != 1
        or ends[0].type is not EventType.RUN_FAILED
        or _code(ends[0]) != "HOOK_CONFLICT"
    ):
        what = ", ".join(f"{e.type.value}#{e.seq}" for e in ends) or "no end"
        violate(f"contender {short} refused its hook and ended {what}, not failed once")
    if not marks:
        violate(f"contender {short} lost its refused batch's attribute")
    if any(e.type is EventType.HOOK_CREATED for e in log):
        violate(f"contender {short} recorded the hook it was refused")
    completed = {e.correlation_id for e in log if e.type is EventType.STEP_COMPLETED}
    reversals: dict[str, int] = {}
    forward: set[str] = set()
    for e in log:
        if e.type is not EventType.STEP_CREATED:
            continue
        of = e.data.get("compensates")
        if isinstance(of, str):
            reversals[of] = reversals.get(of, 0) + 1
        elif e.data.get("stepName") == charge.name:
            forward.add(str(e.correlation_id))
    for cid in sorted(forward | set(reversals)):
        want = 1 if cid in completed and cid in forward else 0
        got = reversals.get(cid, 0)
        if got != want:
            violate(f"contender {short} reversed step {cid} {got} times, not {want}")
