"""What the pure planner and the decision table answer for one recorded history at one probe.

A probe is the delivery and the moment the planner is asked at: the arriving message's id
(``me``), the backstop key it carries, the local clock (``now``), the lease and the inline
ownership switch. :func:`observe` feeds the history to a fresh :class:`Replay` of its workflow
and returns, as plain JSON, ``next_move``; for a suspension the decision batch and the
dispatch plan; for an unwind the phase and the next compensation; for a paused run whether
the delivery holds a step the pause holds and how long it is handed back for; for a probe
that names a batch the world ``refused`` (a failure of the run), ``fail_move``'s answer; and
the decision table's verdict for every created, non-terminal step. The recorder stores this
answer beside the log and the test asks again; both go through this one function, so what is
compared is the planner, never two ways of reading it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from wayline._core.dispatch import decide
from wayline._core.events import Event, EventType
from wayline._core.histories import History
from wayline._core.planning import (
    Arrival,
    BeginFailedUnwind,
    BeginUnwind,
    CancelChildren,
    CompleteWaits,
    DisposeHooks,
    EndUnwind,
    FailMove,
    FailNow,
    Park,
    Paused,
    RunCompensation,
    RunFailure,
    Send,
    Suspend,
    Unwind,
    UnwindMove,
    WaitElsewhere,
    decision_batch,
    dispatch_plan,
    fail_move,
    held_delay,
    holds_a_step,
    next_move,
    unwind_move,
)
from wayline._core.projections import fold
from wayline._core.replay import Replay
from wayline.errors import ReplayDivergenceError, WorkflowDeterminismError

from . import workflows

LEASE = 860.0
"""The lease the probes plan with unless they say otherwise (``Settings.lease_seconds``)."""
MAX_INLINE = 8
"""Lazy inline steps per batch unless a probe says otherwise."""


def _send(send: Send) -> list[Any]:
    return [send.topic, send.key, round(send.delay, 3)]


def _events(events: list[Any]) -> list[list[Any]]:
    return [[str(e.type), e.correlation_id] for e in events]


def observe(history: History, probe: Mapping[str, Any], code: str | None = None) -> dict[str, Any]:
    """The planner's answer for ``history`` at ``probe`` (see the module's docstring)."""
    replay = Replay(workflows.definition(code or history.workflow), history.run_id)
    try:
        return _observe(replay, history.events, probe)
    finally:
        replay.close()


def _observe(replay: Replay, events: list[Event], probe: Mapping[str, Any]) -> dict[str, Any]:
    try:
        replay.feed(events)
    except (ReplayDivergenceError, WorkflowDeterminismError) as err:
        return {"diverged": err.message}
    now, me = float(probe["now"]), str(probe["me"])
    lease = float(probe.get("lease", LEASE))
    ownership = bool(probe.get("ownership", True))
    backstop = probe.get("backstopKey")
    answer: dict[str, Any] = {}
    move = next_move(replay, closing=bool(probe.get("closing", False)), now=now)
    answer["move"] = type(move).__name__
    if isinstance(move, CompleteWaits | DisposeHooks):
        answer["events"] = _events(move.events)
    table = {}
    for cid, rec in replay.open_steps.items():
        d = decide(
            rec.state(),
            run_id=replay.run_id,
            correlation_id=cid,
            my_message_id=me,
            now=now,
            lease=lease,
            ownership_enabled=ownership,
            arriving_backstop_key=backstop,
        )
        table[cid] = [str(d.action), d.idempotency_key, round(d.delay_seconds, 3)]
    answer["table"] = table
    if isinstance(move, Suspend):
        batch = decision_batch(
            replay,
            my_id=me,
            max_inline=int(probe.get("maxInline", MAX_INLINE)),
            new_run_id=lambda: "wf_child_of_the_probe",
            lease=lease,
        )
        answer["batch"] = {
            "events": _events(batch.events),
            "lazy": [rec.cid for rec in batch.lazy],
            "sends": [_send(s) for s in batch.sends],
        }
        plan = dispatch_plan(
            replay,
            Arrival(me, backstop, dict(probe.get("payload", {}))),
            now=now,
            lease=lease,
            ownership=ownership,
            skip={rec.cid for rec in batch.lazy},
            armed={s.key for s in batch.sends},
        )
        answer["dispatch"] = {
            "owned": [rec.cid for rec in plan.owned],
            "sends": [_send(s) for s in plan.sends],
            "backstops": [rec.cid for rec, _ in plan.backstops],
        }
    if replay.ending.phase != "running" or type(move).__name__ == "Unwind":
        nxt = replay.next_compensation()
        answer["unwind"] = {
            "phase": replay.ending.phase,
            "plan": [rec.cid for rec in replay.compensation_plan()],
            # the forward step, its latest compensation and how that ended (None: to start)
            "next": None
            if nxt is None
            else [nxt[0].cid, *([None, None] if nxt[1] is None else [nxt[1].cid, nxt[1].outcome])],
            "abandoned": bool(replay.ending.abandoned),
        }
    if isinstance(move, Unwind):
        arrival = Arrival(me, backstop, dict(probe.get("payload", {})))
        step = unwind_move(replay, arrival, now=now, lease=lease, ownership=ownership)
        answer["unwind"]["move"] = _unwind_move(step)
    if isinstance(move, Paused):
        answer["held"] = _held(replay, events, me, now)
    refused = probe.get("refused")
    if refused is not None:
        failure = RunFailure(refused["code"], refused["message"], dict(refused["fields"]))
        answer["failed"] = _fail_move(fail_move(replay, failure))
    return answer


def _held(replay: Replay, events: list[Event], me: str, now: float) -> dict[str, Any]:
    """Whether the delivery holds a step the pause holds, read as ``Handler._paused`` reads it
    (the fold of the log: a redelivery that finds the run paused) and as the ``Paused`` move
    reads it (the replay: a re-stamp refused over the pause), and how long such a delivery is
    handed back for (``held_delay``, from the time of the pause, as ``Handler._paused``)."""
    view = fold(replay.run_id, events)
    paused = [e.created_at for e in events if e.type is EventType.RUN_PAUSED]
    return {
        "holds": holds_a_step(me, view.steps.values()),
        "holdsInReplay": holds_a_step(me, replay.steps.values()),
        "delay": round(held_delay(paused[-1] if paused else None, now), 3),
    }


def _fail_move(move: FailMove) -> dict[str, Any]:
    """What a failure the world found does to the run, as plain JSON."""
    out: dict[str, Any] = {"kind": type(move).__name__}
    if isinstance(move, FailNow | BeginFailedUnwind):
        out["events"] = _events(move.events)
        out["error"] = move.failure.error()
    return out


def _unwind_move(move: UnwindMove) -> dict[str, Any]:
    """The saga unwind's next move as plain JSON: its kind and what it writes or sends."""
    out: dict[str, Any] = {"kind": type(move).__name__}
    match move:
        case BeginUnwind(events):
            out["events"] = _events(events)
        case EndUnwind(why, abandoned):
            out |= {"reason": why.get("reason"), "abandoned": abandoned}
        case CancelChildren(children, _, then):
            out |= {"children": [c.cid for c in children], "thenEnd": then is not None}
        case Park(stuck, failed):
            out |= {"stepId": stuck.get("stepId"), "notRun": stuck.get("notRun")}
            out["failed"] = None if failed is None else failed.cid
        case RunCompensation(forward, cid, attempt, recovery, events):
            out |= {"forward": forward.cid, "cid": cid, "attempt": attempt}
            out |= {"recovery": recovery, "events": _events(events)}
        case WaitElsewhere(send, backstop):
            out |= {"send": _send(send), "backstop": backstop}
    return out


def difference(case: str, old: Any, new: Any) -> str:
    """The history's name and a diff of the recorded answer against today's."""
    a = json.dumps(old, indent=1, sort_keys=True).splitlines()
    b = json.dumps(new, indent=1, sort_keys=True).splitlines()
    diff = "\n".join(difflib.unified_diff(a, b, "recorded", "planner today", lineterm=""))
    return f"golden history {case!r}: the planner's answer changed\n{diff}"
