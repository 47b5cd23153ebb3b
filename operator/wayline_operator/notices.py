"""Kubernetes Events for a ``WorkflowRun``: what ``kubectl describe`` shows. Pure: which
notices a stretch of the run's log makes, and a per-resource budget so a long run cannot
flood etcd. The handlers post what these return (``kopf.event``).

One Event for a short run: when a run's start and its end reach the operator in one batch
(the run ended before its first status write) with nothing else to say in between, its
``RunStarted`` is folded into the end's Event (``RunSucceeded``, ``RunFailed``,
``RunCancelled``, ``RunTerminated``), whose message then gives the start time. Every Event
is one write to etcd, and this is the common case at scale. A run with a story (a retry, a
hook, a recovery, a compensation) or one seen while live keeps its ``RunStarted``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from wayline.history import Event, EventType, fmt_error

from .status import stamp

NORMAL, WARNING = "Normal", "Warning"
ENDS = frozenset({"RunSucceeded", "RunFailed", "RunCancelled", "RunTerminated"})
MESSAGE_LIMIT = 1024


@dataclass(frozen=True, slots=True)
class Notice:
    type: str
    reason: str
    message: str
    key: str = ""
    """What the notice is about, once (a log entry's seq, a wake's idempotency key): its Event
    gets a name derived from it, so posting it again creates nothing (``kube.post_event``).
    Empty: a notice that may recur (``WaitingForWorker``), posted under a generated name."""


def notices(events: Sequence[Event], after_seq: int = 0) -> list[Notice]:
    """The notices the log's events after ``after_seq`` make, in log order."""
    out: list[Notice] = []
    names: dict[str, str] = {}
    starts: dict[str, int] = {}
    started_at = 0.0
    for e in events:
        cid, data = e.correlation_id or "", e.data
        if e.type is EventType.STEP_CREATED:
            names[cid] = str(data.get("stepName", cid))
        if e.type is EventType.STEP_STARTED:
            starts[cid] = starts.get(cid, 0) + 1
        if e.seq <= after_seq:
            continue
        notice = _notice(e, names.get(cid, cid), starts.get(cid, 0))
        if notice is not None:
            out.append(replace(notice, key=str(e.seq)))
            if e.type is EventType.RUN_STARTED:
                started_at = e.created_at
    return _fold_start(out, started_at)


def _fold_start(out: list[Notice], started_at: float) -> list[Notice]:
    """``[RunStarted, <end>]`` becomes ``[<end> (started at ...)]`` (module docstring)."""
    if len(out) != 2 or out[0].reason != "RunStarted" or out[1].reason not in ENDS:
        return out
    end = out[1]
    return [replace(end, message=f"{end.message} (started {stamp(started_at)})")]


def _notice(e: Event, step: str, starts: int) -> Notice | None:
    data, t = e.data, e.type
    if t is EventType.RUN_STARTED:
        return Notice(NORMAL, "RunStarted", f"run {e.run_id} started")
    if t is EventType.STEP_RETRYING:
        # ``retryAfter`` is the instant the next attempt is due (epoch seconds), not a delay:
        # the message gives the delay from the event's own time, which kubectl shows beside it.
        after = data.get("retryAfter")
        when = ""
        if isinstance(after, int | float) and not isinstance(after, bool):
            when = f"; next attempt in {max(0.0, after - e.created_at):.3g}s"
        return Notice(
            WARNING, "StepRetrying", f"step {step} failed: {fmt_error(data.get('error'))}{when}"
        )
    if t is EventType.STEP_STARTED and data.get("ownerMessageId") and starts > 1:
        attempt = data.get("attempt")
        return Notice(
            NORMAL,
            "OwnedRecovery",
            f"step {step} (attempt {attempt}) taken over by a new owner after its lease lapsed",
        )
    if t is EventType.HOOK_CREATED:
        token = data.get("token")
        return Notice(
            NORMAL, "WaitingForHook", f"waiting for hook {token} (deliver it with a WorkflowHook)"
        )
    if t is EventType.RUN_COMPENSATING:
        why = data.get("reason") or "ended"
        return Notice(WARNING, "Compensating", f"run {why}: compensating its completed steps")
    if t is EventType.RUN_COMPENSATION_STUCK:
        return Notice(
            WARNING,
            "CompensationStuck",
            f"reversing step {data.get('step')} failed: {fmt_error(data.get('error'))}; raise "
            "spec.compensation.resumes to retry or set spec.compensation.abandon",
        )
    if t is EventType.RUN_COMPLETED:
        return Notice(NORMAL, "RunSucceeded", "the run completed")
    if t is EventType.RUN_FAILED:
        error = data.get("error") or {}
        return Notice(
            WARNING,
            "RunFailed",
            f"[{error.get('code', 'ERROR')}] {error.get('message', '')}",
        )
    if t is EventType.RUN_CANCELLED:
        kind = "RunTerminated" if data.get("terminated") else "RunCancelled"
        return Notice(WARNING, kind, str(data.get("reason") or "cancelled"))
    if t is EventType.RUN_BLOCKED:
        return Notice(WARNING, "WaitingForWorker", str(data.get("message", "")))
    if t is EventType.RUN_PAUSED:
        said = f"paused by {data.get('by', 'client')}: {data.get('reason') or 'no reason given'}"
        return Notice(WARNING, "Paused", said)
    if t is EventType.RUN_UNPAUSED:
        said = f"unpaused by {data.get('by', 'client')}: {data.get('reason') or 'no reason given'}"
        return Notice(NORMAL, "Unpaused", said)
    return None


class Budget:
    """A token bucket per resource: ``burst`` notices at once, then one per ``every`` seconds.
    What it refuses is counted and said in the next notice it lets through."""

    def __init__(self, burst: int = 20, every: float = 3.0) -> None:
        self.burst, self.every = burst, every
        self._tokens: dict[str, float] = {}
        self._stamp: dict[str, float] = {}
        self.dropped: dict[str, int] = {}

    def admit(self, key: str, batch: Sequence[Notice], now: float | None = None) -> list[Notice]:
        now = time.monotonic() if now is None else now
        tokens = self._tokens.get(key, float(self.burst))
        last = self._stamp.get(key, now)
        tokens = min(float(self.burst), tokens + (now - last) / self.every)
        out: list[Notice] = []
        skipped = self.dropped.pop(key, 0)
        for notice in batch:
            if tokens >= 1:
                tokens -= 1
                out.append(notice)
            else:
                self.dropped[key] = self.dropped.get(key, 0) + 1
        if skipped and not out:
            self.dropped[key] = self.dropped.get(key, 0) + skipped
        elif skipped:
            first = out[0]
            out[0] = replace(
                first,
                message=f"{first.message} ({skipped} earlier events not posted: rate limit; "
                "`wayline runs show` has the full timeline)",
            )
        self._tokens[key], self._stamp[key] = tokens, now
        return out

    def forget(self, key: str) -> None:
        for table in (self._tokens, self._stamp, self.dropped):
            table.pop(key, None)
