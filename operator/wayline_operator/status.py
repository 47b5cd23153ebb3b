"""A ``WorkflowRun``'s status as a mirror of its run's log. Pure: unit-tested without a
cluster; the handlers write what it returns.

Phases keep the run's own status values (``pending``, ``running``, ``blocked``,
``compensating``, ``compensation_stuck``, ``completed``, ``failed``, ``cancelled``,
``corrupt``, plus ``invalid`` for a spec that started nothing): the same words ``wayline
runs list``, the worlds and every earlier status used, so a script that reads
``.status.phase`` keeps working and one vocabulary serves kubectl and the CLI. Conditions
carry the CamelCase reasons that Kubernetes tooling expects (``kubectl wait
--for=condition=Succeeded``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from wayline.history import (
    Event,
    RunInfo,
    RunStatus,
    RunView,
    debounced_until,
    fmt_error,
    fold,
    waiting_for_worker,
)

_DONE = {RunStatus.COMPLETED: "Succeeded", RunStatus.FAILED: "Failed"}
MESSAGE_LIMIT = 1024
OUTPUT_LIMIT = 64 * 1024
"""Bytes of a run's output copied into its status: an output may be up to 64 MiB (stored out of
line), an object in etcd about 1.5 MiB; a larger one is named, not copied."""


def seconds_of(value: Any) -> float | None:
    """A Kubernetes timestamp (``2026-12-06T16:25:38Z``) in seconds; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def stamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):  # past the year 9999 (an older version's)
        return None


def short_duration(seconds: float | None) -> str:
    """``kubectl``'s own style: ``45s``, ``3m12s``, ``2h5m``, ``3d4h``."""
    if seconds is None:
        return ""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def step_counts(events: Sequence[Event]) -> dict[str, int]:
    """Forward steps created, and steps completed and failed, from the one fold of the log."""
    return fold("", events).step_counts()


def resumes_recorded(events: Sequence[Event]) -> int:
    return fold("", events).compensation_resumes


def waiting_for(
    info: RunInfo,
    events: Sequence[Event],
    *,
    now: float,
    served: Sequence[Mapping[str, Any]] | None = None,
    view: RunView | None = None,
) -> list[dict[str, Any]]:
    """What the live run waits for, most actionable first: a person (a stuck unwind), a worker
    (none serves its workflow), hooks (with the token to answer and its timeout), children,
    sleeps, steps in flight. Empty for a run that ended. Read from the one fold of the log
    (``view``, folded here when not given)."""
    if info.status.terminal:
        return []
    seen = view if view is not None else fold(info.run_id, events)
    out: list[dict[str, Any]] = []
    if info.status is RunStatus.COMPENSATION_STUCK:
        stuck = seen.stuck
        out.append(
            {
                "kind": "person",
                "step": stuck.step if stuck else None,
                "stepId": stuck.step_id if stuck else None,
                "error": fmt_error(stuck.error if stuck else None),
                "message": "a compensation failed: raise spec.compensation.resumes to retry it "
                "or set spec.compensation.abandon",
            }
        )
    slot = limit_wait(info) or debounce_wait(info, events)
    if slot is not None:
        out.append(slot)
    worker = None if slot is not None else worker_wait(info, served, now=now)
    if worker is not None:
        entry: dict[str, Any] = {"kind": "worker", "workflow": info.workflow, "message": worker}
        pin = info.attributes.get("definition")
        if isinstance(pin, Mapping) and pin.get("identity"):
            entry["identity"] = str(pin["identity"])
        out.append(entry)
    for cid, hook in seen.hooks.items():
        if hook.status != "waiting":
            continue
        entry = {"kind": "hook", "token": hook.token, "hookId": cid}
        if hook.timeout_at is not None:
            entry["timeoutAt"] = stamp(hook.timeout_at)
        out.append(entry)
    for cid, child_run in seen.children.items():
        entry = {
            "kind": "child",
            "childId": cid,
            "runId": child_run,
            "workflow": seen.child_workflows.get(cid),
        }
        deadline = seen.waits.get(f"{cid}.deadline")
        if deadline is not None and deadline.completed_at is None:
            entry["deadlineAt"] = stamp(deadline.resume_at)
        out.append(entry)
    for cid, wait in seen.waits.items():
        if wait.completed_at is None and not cid.endswith(".deadline"):
            out.append({"kind": "sleep", "waitId": cid, "until": stamp(wait.resume_at)})
    for step in seen.steps.values():
        if step.terminal:
            continue
        entry = {
            "kind": "step",
            "name": step.name,
            "stepId": step.cid,
            "attempt": step.attempts[-1].number if step.attempts else 0,
            "state": step.status,
        }
        if step.status == "retrying" and step.attempts:
            entry["error"] = fmt_error(step.attempts[-1].error)
        out.append(entry)
    return out


def limit_wait(info: RunInfo) -> dict[str, Any] | None:
    """A run blocked on a concurrency slot (``wayline.Limit``) or on a rate limit's next token
    (``wayline.RateLimit``, with ``until``: when it is due): its own (before it starts) or one
    of its steps' (``name``/``stepId`` say which)."""
    why = info.error or {}
    kind = why.get("waitingFor")
    if info.status is not RunStatus.BLOCKED or kind not in ("concurrency", "rate_limit"):
        return None
    entry: dict[str, Any] = {"kind": kind, "limit": why.get("limit")}
    if kind == "rate_limit":
        entry["until"] = why.get("until")
    if why.get("step"):
        entry.update(name=why.get("step"), stepId=why.get("stepId"))
    entry["message"] = why.get("message")
    return entry


def debounce_wait(info: RunInfo, events: Sequence[Event]) -> dict[str, Any] | None:
    """A debounced run that has not begun (``wayline.Debounce``): it begins at ``until``
    unless another start with its key comes first, and moves on by itself."""
    until = debounced_until(info, events)
    if until is None:
        return None
    key = (info.attributes.get("debounce") or {}).get("key")
    shown = stamp(until)
    return {
        "kind": "debounce",
        "limit": key,
        "until": shown,
        "message": f"debounced: begins at {shown} unless started again with key {key!r}",
    }


def worker_wait(
    info: RunInfo, served: Sequence[Mapping[str, Any]] | None, *, now: float
) -> str | None:
    """Why no worker drives this run, or None. A blocked run says so itself (a worker with
    another definition saw it); any other live run waits for a worker as soon as no live
    worker in the world's registry (``served``: what workers record every heartbeat) serves
    its workflow (and the definition identity its first start pinned). ``None`` for
    ``served``: the registry was not read (nothing is claimed)."""
    if info.status is RunStatus.BLOCKED:
        return str((info.error or {}).get("message") or "waiting for a matching worker")
    if served is None:
        return None
    return waiting_for_worker(info, served, now)


def summary(waits: Sequence[Mapping[str, Any]]) -> str:
    """The short ``WAITING-FOR`` column: the first thing waited for, and how many more."""
    if not waits:
        return ""
    first = waits[0]
    kind = first["kind"]
    what = {
        "person": f"person ({first.get('step')})",
        "worker": f"worker ({first.get('workflow')})",
        "hook": f"hook {first.get('token')}",
        "child": f"child {first.get('workflow')}",
        "sleep": f"sleep until {first.get('until')}",
        "step": f"step {first.get('name')}",
        "concurrency": f"concurrency ({first.get('name') or first.get('limit')})",
        "rate_limit": f"rate limit ({first.get('name') or first.get('limit')}) until "
        f"{first.get('until')}",
        "debounce": f"debounce ({first.get('limit')}) until {first.get('until')}",
    }.get(kind, kind)
    more = len(waits) - 1
    return f"{what} +{more}" if more else what


def _message(info: RunInfo, waits: Sequence[Mapping[str, Any]]) -> str:
    if info.status is RunStatus.COMPLETED:
        return "the run completed"
    if info.status.terminal:
        return fmt_error(info.error)
    if waits:
        first = waits[0]
        if first["kind"] in ("person", "worker", "concurrency", "rate_limit", "debounce"):
            return str(first.get("message", ""))
        if first["kind"] == "hook":
            return f"waiting for hook {first['token']} (deliver it with a WorkflowHook)"
        return f"waiting for {summary(waits)}"
    return str(info.status)


def run_status(
    info: RunInfo,
    events: Sequence[Event],
    *,
    now: float,
    generation: int | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
    served: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The status fields that mirror the run (kopf's own keys live beside them).
    ``previous`` is the resource's current conditions: a condition's ``lastTransitionTime``
    moves only when its status changes."""
    view = fold(info.run_id, events)
    counts = view.step_counts()
    waits = waiting_for(info, events, now=now, served=served, view=view)
    status: dict[str, Any] = {
        "runId": info.run_id,
        "workflow": info.workflow,
        "priority": info.ordering.priority,
        "fairnessKey": info.ordering.fairness_key or None,
        "phase": str(info.status),
        "message": _message(info, waits)[:MESSAGE_LIMIT],
        "lastSeq": info.last_seq,
        "observedGeneration": generation,
        "steps": counts,
        "progress": f"{counts['completed']}/{counts['created']}",
        "waitingFor": waits,
        "waitingForSummary": summary(waits),
        "compensationResumes": view.compensation_resumes,
        "createdAt": stamp(info.created_at),
        "startedAt": stamp(info.started_at),
        "endedAt": stamp(info.ended_at),
        # Only once ended: a live run's would freeze between writes (kubectl's Started
        # column counts a live run's time instead).
        "duration": _duration(info),
        "output": _output(info) if info.status is RunStatus.COMPLETED else None,
        "error": _error(info.error) if info.status is not RunStatus.COMPLETED else None,
    }
    status["conditions"] = merge_conditions(
        previous, conditions(info, waits), now=now, generation=generation
    )
    return status


def _duration(info: RunInfo) -> str:
    if info.started_at is None or info.ended_at is None:
        return ""
    return short_duration(info.ended_at - info.started_at)


def _output(info: RunInfo) -> Any:
    size = len(json.dumps(info.output, separators=(",", ":")))
    if size <= OUTPUT_LIMIT:
        return info.output
    return {"omitted": f"{size} bytes, over {OUTPUT_LIMIT}: wayline runs show {info.run_id}"}


def _error(error: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not error:
        return None
    return {k: error[k] for k in ("code", "message", "name") if error.get(k) is not None}


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in text.split("_"))


def conditions(info: RunInfo, waits: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``Succeeded`` (True completed, False failed or cancelled, Unknown while live),
    ``Progressing`` (True while a worker can move the run on its own) and ``Blocked`` (True
    while it needs someone: a person for a stuck unwind or a hook, or a worker)."""
    if info.status is RunStatus.CONTINUED_AS_NEW:
        # the run went on in its next run, which this resource does not follow: neither a
        # success nor a failure, and nothing more happens here
        went = f"the run went on in run {info.continued_as} (wayline runs show {info.continued_as})"
        return [
            _cond("Succeeded", "Unknown", "ContinuedAsNew", went),
            _cond("Progressing", "False", "ContinuedAsNew", went),
            _cond("Blocked", "False", "ContinuedAsNew", went),
        ]
    if info.status.terminal:
        ok = info.status is RunStatus.COMPLETED
        reason = _DONE.get(info.status, "Cancelled")
        message = "" if ok else fmt_error(info.error)
        return [
            _cond("Succeeded", "True" if ok else "False", reason, message),
            _cond("Progressing", "False", reason, "the run ended"),
            _cond("Blocked", "False", reason, "the run ended"),
        ]
    kinds = [w["kind"] for w in waits]
    blocked: tuple[str, str] | None = None
    if info.status is RunStatus.PAUSED:
        why = info.error or {}
        blocked = ("Paused", f"paused by {why.get('by', 'client')}: {why.get('message', '')}")
    elif "person" in kinds:
        blocked = ("CompensationStuck", str(waits[kinds.index("person")]["message"]))
    elif "worker" in kinds:
        blocked = ("WaitingForWorker", str(waits[kinds.index("worker")]["message"]))
    elif kinds and set(kinds) <= {"hook", "child"} and "hook" in kinds:
        token = waits[kinds.index("hook")]["token"]
        blocked = ("WaitingForHook", f"waiting for hook {token}")
    phase = _camel(str(info.status))
    out = [_cond("Succeeded", "Unknown", phase, "")]
    if blocked is None:
        out.append(_cond("Progressing", "True", phase, summary(waits)))
        out.append(_cond("Blocked", "False", phase, ""))
    else:
        out.append(_cond("Progressing", "False", blocked[0], blocked[1]))
        out.append(_cond("Blocked", "True", blocked[0], blocked[1]))
    return out


def _cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message[:MESSAGE_LIMIT]}


def merge_conditions(
    previous: Sequence[Mapping[str, Any]],
    fresh: Sequence[Mapping[str, Any]],
    *,
    now: float,
    generation: int | None,
) -> list[dict[str, Any]]:
    """KEP-1623: each condition gets ``observedGeneration``; its ``lastTransitionTime`` is kept
    from ``previous`` unless its ``status`` changed."""
    before = {str(c.get("type")): c for c in previous if isinstance(c, Mapping)}
    out = []
    for cond in fresh:
        old = before.get(cond["type"])
        moved = old is None or old.get("status") != cond["status"]
        when = stamp(now) if moved or not old or not old.get("lastTransitionTime") else None
        out.append(
            {
                **cond,
                "observedGeneration": generation,
                "lastTransitionTime": when or (old or {}).get("lastTransitionTime"),
            }
        )
    return out


def invalid_status(
    message: str,
    *,
    now: float,
    generation: int | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The status of a resource whose spec cannot start a run (nothing was started)."""
    return _held_status("invalid", "False", "InvalidSpec", message, now, generation, previous)


def id_in_use_status(
    message: str,
    *,
    now: float,
    generation: int | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The status of a resource whose name a live run of someone else holds: ``pending``
    (nothing started yet), blocked until that run ends (its start is tried again)."""
    return _held_status("pending", "Unknown", "IdInUse", message, now, generation, previous)


def corrupt_status(
    message: str,
    *,
    now: float,
    generation: int | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The status of a run whose log cannot be read (fenced until `wayline runs repair`):
    blocked on a person, in its conditions as in its phase, so that ``kubectl wait`` and an
    alert on conditions see it as well as ``kubectl get``."""
    held = _held_status("corrupt", "Unknown", "CorruptLog", message, now, generation, previous)
    return {**held, "lastSeq": None}


def _held_status(
    phase: str,
    succeeded: str,
    reason: str,
    message: str,
    now: float,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """A resource that goes nowhere until a person acts: not progressing, blocked, for
    ``reason``."""
    fresh = [
        _cond("Succeeded", succeeded, reason, message),
        _cond("Progressing", "False", reason, message),
        _cond("Blocked", "True", reason, message),
    ]
    return {
        "phase": phase,
        "message": message[:MESSAGE_LIMIT],
        "observedGeneration": generation,
        "waitingFor": [],
        "waitingForSummary": "",
        "conditions": merge_conditions(previous, fresh, now=now, generation=generation),
    }


_HOOK_REASONS = {"delivered": "Delivered", "waiting": "WaitingForHook", "failed": "Refused"}


def hook_status(
    phase: str,
    message: str,
    *,
    now: float,
    generation: int | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
    run_id: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """A ``WorkflowHook``'s status: its phase, and one ``Delivered`` condition (True once its
    payload reached the run; False while no hook holds its token, or for good when the payload
    was refused), so that ``kubectl wait --for=condition=Delivered`` waits for it. ``reason``
    overrides the phase's (``WrongNamespace``: a failed hook whose run is another
    namespace's)."""
    reason = reason or _HOOK_REASONS[phase]
    fresh = [_cond("Delivered", "True" if phase == "delivered" else "False", reason, message)]
    status: dict[str, Any] = {"phase": phase, "message": message[:MESSAGE_LIMIT]}
    if run_id is not None:
        status["runId"] = run_id
    status["observedGeneration"] = generation
    status["conditions"] = merge_conditions(previous, fresh, now=now, generation=generation)
    return status
