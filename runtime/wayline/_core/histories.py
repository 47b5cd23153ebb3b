"""Recorded histories, replayed offline against the current code (Temporal's ``Replayer``).

A history is one run's log as ``wayline runs export`` writes it: one JSON object per line,
``{"format": "wayline-history/1", "runId": ..., "workflow": ..., "events": [...]}``, each event
as :meth:`Event.to_json` gives it. :func:`check` replays one against the workflow definitions a
deploy would run, with no world, and says what a worker of that code would do with the run:

- ``ok``: the code replays the whole log; a live run would go on from where it stands;
- ``diverged``: the replay meets an entry the code does not make there (the message is the
  one a worker writes into the run's ``run_blocked``), or the log records the run's successful
  end where the code still has work to do;
- ``not served``: the run is pinned to a definition identity this code does not have, so a
  worker of this code would never receive it (it waits for a worker of its own version);
- ``unknown workflow``: no definition of the run's workflow is given.

Nothing here runs a step body or writes anything: the replay returns the recorded results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ReplayDivergenceError, WorkflowDeterminismError
from .definitions import WorkflowDefinition
from .events import Event, EventType
from .replay import Replay

FORMAT = "wayline-history/1"

OK, DIVERGED, NOT_SERVED, UNKNOWN_WORKFLOW = "ok", "diverged", "not served", "unknown workflow"


@dataclass(frozen=True)
class History:
    """One run's recorded log."""

    run_id: str
    workflow: str
    events: list[Event]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "runId": self.run_id,
            "workflow": self.workflow,
            "events": [e.to_json() for e in self.events],
        }


@dataclass(frozen=True)
class ReplayResult:
    """What a worker of the given code would do with one recorded run."""

    run_id: str
    workflow: str
    verdict: str
    """``ok``, ``diverged``, ``not served`` or ``unknown workflow``."""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == OK

    def __str__(self) -> str:
        said = f"{self.run_id} ({self.workflow}): {self.verdict}"
        return f"{said}: {self.message}" if self.message else said


def history_of(run_id: str, events: list[Event]) -> History:
    """The history of a run from its log as a world lists it."""
    workflow = ""
    if events and events[0].type is EventType.RUN_CREATED:
        workflow = str(events[0].data.get("workflow", ""))
    return History(run_id, workflow, list(events))


def parse_history(text: str, where: str = "history") -> History:
    """One exported line as a :class:`History`; ``ValueError`` naming ``where`` and what is
    wrong for anything ``runs export`` does not write."""
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{where}: not JSON ({err})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f'{where}: not a Wayline history (expected "format": {FORMAT!r})')
    run_id, workflow, items = raw.get("runId"), raw.get("workflow"), raw.get("events")
    if not isinstance(run_id, str) or not isinstance(workflow, str) or not isinstance(items, list):
        raise ValueError(f"{where}: a history needs a runId, a workflow and a list of events")
    events = [_event(run_id, item, f"{where}, event {i + 1}") for i, item in enumerate(items)]
    for i, e in enumerate(events):
        if e.seq != i + 1:
            raise ValueError(f"{where}: event {i + 1} has seq {e.seq} (a log is numbered from 1)")
    return History(run_id, workflow, events)


def _event(run_id: str, item: Any, where: str) -> Event:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: not an object")
    try:
        kind = EventType(str(item.get("type")))
    except ValueError:
        raise ValueError(f"{where}: unknown event type {item.get('type')!r}") from None
    seq, cid, data, at = (
        item.get("seq"),
        item.get("correlationId"),
        item.get("data", {}),
        item.get("createdAt"),
    )
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ValueError(f"{where}: seq must be an integer")
    if cid is not None and not isinstance(cid, str):
        raise ValueError(f"{where}: correlationId must be a string or null")
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: data must be an object")
    if not isinstance(at, int | float) or isinstance(at, bool):
        raise ValueError(f"{where}: createdAt must be a number")
    return Event(run_id, seq, kind, cid, dict(data), float(at))


def _recorded_definition(events: list[Event]) -> Any:
    """The definition the run is pinned to: its start's (a run started by name) or its
    creation's."""
    for e in events[:3]:
        if e.type is EventType.RUN_STARTED and isinstance(e.data.get("definition"), dict):
            return e.data["definition"]
    if events and events[0].type is EventType.RUN_CREATED:
        return events[0].data.get("definition")
    return None


def check(history: History, workflows: Iterable[WorkflowDefinition[..., Any]]) -> ReplayResult:
    """Replay ``history`` against the definition of its workflow among ``workflows``."""
    by_name = {w.name: w for w in workflows}
    workflow = by_name.get(history.workflow)
    if workflow is None:
        known = ", ".join(sorted(by_name)) or "none"
        return ReplayResult(
            history.run_id,
            history.workflow,
            UNKNOWN_WORKFLOW,
            f"no workflow named {history.workflow!r} in the code given (it has: {known})",
        )
    why = workflow.mismatch(_recorded_definition(history.events))
    if why is not None:
        return ReplayResult(
            history.run_id,
            history.workflow,
            NOT_SERVED,
            f"the run is pinned to {why}: a worker of this code never receives it, so it "
            "needs a worker of its own version until it ends",
        )
    replay = Replay(workflow, history.run_id)
    try:
        replay.feed(history.events)
        problem = _unfinished_end(replay, history.events)
    except (ReplayDivergenceError, WorkflowDeterminismError) as err:
        problem = err.message
    finally:
        replay.close()
    verdict = OK if problem is None else DIVERGED
    return ReplayResult(history.run_id, history.workflow, verdict, problem or "")


def _unfinished_end(replay: Replay, events: list[Event]) -> str | None:
    """A log that records the run's successful end while the code, replayed over it, still
    asks for work: the worker that wrote the end ran other code."""
    last = events[-1] if events else None
    if last is None or last.type is not EventType.RUN_COMPLETED:
        return None
    asked = [f"step {s.name!r} ({cid})" for cid, s in replay.new_steps.items()]
    asked += [f"hook ({cid})" for cid in replay.new_hooks]
    asked += [f"sleep ({cid})" for cid in replay.new_waits]
    if replay.finished and not asked:
        return None
    got = asked[0] if asked else "a workflow that has not returned"
    return f"replay divergence at seq {last.seq}, expected the run's end, got {got}"
