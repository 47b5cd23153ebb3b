"""Which failures of a run's log a later redrive undid (pure: a function of the log).

``run_redriven`` reopens a failed run from its failed step (its correlation id). Every
reader folds it in one pass: the world's run view and the timeline (``projections``) reopen
the run and the step when they reach it, and the replay, which settles a workflow's futures
as it reads, must know before it reaches the failure that the failure was undone, so the
workflow never sees it: :func:`redriven_failures` tells it which ``step_failed`` events those
are, from the whole log it is fed.
"""

from __future__ import annotations

from collections.abc import Iterable

from .events import Event, EventType


def redriven_failures(events: Iterable[Event]) -> set[int]:
    """The seqs of the ``step_failed`` events a later ``run_redriven`` of the same step gave
    a fresh attempt budget (each redrive undoes the step's latest failure before it)."""
    latest: dict[str, int] = {}
    undone: set[int] = set()
    for event in events:
        cid = event.correlation_id
        if cid is None:
            continue
        if event.type is EventType.STEP_FAILED:
            latest[cid] = event.seq
        elif event.type is EventType.RUN_REDRIVEN and cid in latest:
            undone.add(latest.pop(cid))
    return undone
