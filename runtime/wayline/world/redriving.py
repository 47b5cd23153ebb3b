"""Re-driving a failed run in place: one ``run_redriven`` recorded with who asked and why,
and the wake that has a worker go on with it (docs/day2.md, "Fork and redrive").

The redrive reopens the run from its failed step (the latest forward step that failed): the
run is running again, the step goes back to pending with a fresh attempt budget (its next
attempt is numbered 1), and every step that completed before it keeps its result. It is
decided from a fenced read of the log, so it is recorded once however many ask at once, and
refused, with nothing recorded, for a run that has not failed, that failed outside a step,
whose compensations ran, that is a child (its parent was told it failed), that has a hook or
a child still open, or whose definition no live worker serves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .._core.dispatch import FLOW_TOPIC
from .._core.events import Event, EventType, NewEvent, RunStatus
from .._core.projections import RunInfo, StepView, fold
from ..errors import ErrorCause, RedriveRefusedError, RunNotFoundError, SequenceConflictError
from .registry import waiting_for_worker
from .seam import World
from .sending import send


@dataclass(frozen=True, slots=True)
class Redrive:
    """What a redrive re-drives (or, in a dry run, would): the run and its failed step."""

    run_id: str
    workflow: str
    step: str
    """The step's name and occurrence, ``NAME#N`` (N counted from 1)."""
    step_id: str


async def redrive_run(
    world: World, run_id: str, reason: str, by: str, rounds: int, *, dry_run: bool = False
) -> Redrive:
    """Record the redrive and wake the run (``dry_run``: check it, record nothing); raises
    :class:`RedriveRefusedError` naming why the run cannot be redriven."""
    for _ in range(rounds):
        info = await world.get_run(run_id)
        if info is None:
            raise RunNotFoundError(f"no run {run_id}")
        events = await world.list_events(run_id)
        chosen = await _check(world, info, events)
        if dry_run:
            return chosen
        data = {"reason": reason, "by": by, "stepId": chosen.step_id, "step": chosen.step}
        event = NewEvent(EventType.RUN_REDRIVEN, chosen.step_id, data)
        try:
            await world.append(run_id, [event], expected_seq=events[-1].seq)
        except SequenceConflictError:
            continue
        # no key: a wake under a key still held by the failed run's last message would be
        # dropped, and that message was acked without driving the run
        await send(world, FLOW_TOPIC, {"runId": run_id, "reason": "redrive"})
        return chosen
    raise SequenceConflictError(f"run {run_id} kept moving under {rounds} redrives", last_seq=0)


async def _check(world: World, info: RunInfo, events: list[Event]) -> Redrive:
    run_id = info.run_id
    if info.status is not RunStatus.FAILED:
        raise RedriveRefusedError(f"run {run_id} is {info.status}; only a failed run is redriven")
    parent = info.attributes.get("parent")
    if isinstance(parent, dict) and parent.get("runId"):
        raise RedriveRefusedError(
            f"run {run_id} is a child of run {parent['runId']}, which was told it failed; "
            "redrive or fork the parent instead"
        )
    if any(e.type is EventType.RUN_COMPENSATING for e in events):
        raise RedriveRefusedError(f"run {run_id} ran its compensations; fork it instead")
    view = fold(run_id, events)
    step = _failed_step(view.steps.values(), events)
    if step is None:
        raise RedriveRefusedError(
            f"run {run_id} failed outside a step (its own code raised, not a step's failure "
            "it let through); fork it instead"
        )
    still = sorted(cid for cid in view.hooks if cid in _open_hooks(events))
    still += sorted(view.children)
    if still:
        raise RedriveRefusedError(
            f"run {run_id} has {', '.join(still)} still open; fork it from a step instead"
        )
    why = waiting_for_worker(replace(info, status=RunStatus.RUNNING), await world.list_served())
    if why is not None:
        raise RedriveRefusedError(f"run {run_id}: {why.split(': ', 1)[-1]}")
    return Redrive(run_id, info.workflow, f"{step.name}#{step.occurrence + 1}", step.cid)


def _failed_step(steps: Iterable[StepView], events: list[Event]) -> StepView | None:
    """The step whose failure the run failed with: the latest forward step that failed under
    the name the run's error names. None when the run's own code raised (a workflow that
    caught a step's failure and then failed on its own): re-opening that step would replay a
    path the code did not take."""
    end = next((e for e in reversed(events) if e.type is EventType.RUN_FAILED), None)
    error = (end.data or {}).get("error") if end is not None else None
    named = ErrorCause.from_recorded(error).step if isinstance(error, Mapping) else None
    if named is None:
        return None
    failed = [s for s in steps if s.compensates is None and s.status == "failed"]
    return max(
        (s for s in failed if s.name == named), key=lambda s: s.ended_at or 0.0, default=None
    )


def _open_hooks(events: list[Event]) -> set[str]:
    """The hooks created and never disposed (an ended run's tokens were freed, but its log
    still has them waiting: a redrive would wake a hook no token reaches)."""
    created = {str(e.correlation_id) for e in events if e.type is EventType.HOOK_CREATED}
    return created - {str(e.correlation_id) for e in events if e.type is EventType.HOOK_DISPOSED}
