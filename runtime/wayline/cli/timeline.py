"""Runs as people read them: a run's event log folded into steps, hooks and waits, printed
live while it runs (``wayline run``) or as a timeline afterwards (``wayline runs show``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from .._core.events import Event, EventType
from ..world import RunInfo


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"


def fmt_time(epoch: float | None) -> str:
    if epoch is None or epoch <= 0:
        return "-"
    return datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def fmt_clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%H:%M:%S")


def fmt_json(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt_error(error: Mapping[str, Any] | None) -> str:
    if not error:
        return "unknown error"
    code = error.get("code")
    name = error.get("name")
    message = str(error.get("message", ""))
    head = f"{name}: {message}" if name and name != code else message
    return f"[{code}] {head}" if code and code != "USER_ERROR" else head


def fmt_schedule(data: Mapping[str, Any]) -> str:
    """A step_retrying event's schedule: which attempt of how many, and what set the delay."""
    policy = data.get("policy")
    if not isinstance(policy, Mapping):
        return ""
    head = f"attempt {data.get('attempt')} of {policy.get('maxAttempts')}"
    if data.get("source") == "retry_after":
        return f"{head}, retry_after from the step"
    parts = [f"backoff x{policy.get('backoff')}" if policy.get("backoff") != 1.0 else "fixed"]
    if policy.get("maxInterval") is not None:
        parts.append(f"max {fmt_duration(float(policy['maxInterval']))}")
    if policy.get("jitter"):
        parts.append(f"jitter {policy['jitter']}")
    return f"{head}, {', '.join(parts)}"


@dataclass
class Attempt:
    number: int
    started_at: float
    ended_at: float | None = None
    outcome: str = "running"  # running | completed | retrying | failed
    error: Mapping[str, Any] | None = None
    retry_at: float | None = None
    schedule: str = ""
    """Why the retry waits that long ("policy 2/5, x2.0" or "retry_after"), from the log."""

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "outcome": self.outcome,
            "error": dict(self.error) if self.error else None,
            "retryAt": self.retry_at,
            "schedule": self.schedule or None,
        }


@dataclass
class StepView:
    cid: str
    name: str
    created_at: float
    status: str = "pending"
    attempts: list[Attempt] = field(default_factory=list)
    ended_at: float | None = None
    result: Any = None
    error: Mapping[str, Any] | None = None
    compensates: str | None = None
    """For a compensation (saga reversal): the id of the forward step it reverses."""

    @property
    def label(self) -> str:
        return f"{self.name} (reverses {self.compensates})" if self.compensates else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "name": self.name,
            "compensates": self.compensates,
            "status": self.status,
            "createdAt": self.created_at,
            "endedAt": self.ended_at,
            "attempts": [a.to_json() for a in self.attempts],
            "result": self.result,
            "error": dict(self.error) if self.error else None,
        }


@dataclass
class HookView:
    cid: str
    token: str
    created_at: float
    status: str = "waiting"  # waiting | received | timed out | disposed
    timeout_at: float | None = None
    received_at: float | None = None
    payload: Any = None
    type: str | None = None
    """A typed hook's payload class (``module:Qualname``)."""
    metadata: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "token": self.token,
            "type": self.type,
            "metadata": self.metadata,
            "status": self.status,
            "createdAt": self.created_at,
            "timeoutAt": self.timeout_at,
            "receivedAt": self.received_at,
            "payload": self.payload,
        }


@dataclass
class WaitView:
    cid: str
    created_at: float
    resume_at: float
    completed_at: float | None = None
    decided_at: float | None = None
    """Workflow time when the sleep was asked for (the log's time before this batch)."""
    early: bool = False
    """Woken before its time (``Client.wake_up``)."""

    @property
    def seconds(self) -> float:
        return self.resume_at - (self.decided_at or self.created_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.cid,
            "status": "completed" if self.completed_at is not None else "waiting",
            "createdAt": self.created_at,
            "resumeAt": self.resume_at,
            "completedAt": self.completed_at,
            "early": self.early,
        }


@dataclass
class Timeline:
    """A run's log folded into what a person asks about. Tolerant: an event it does not
    expect (a newer runtime's) is skipped, never fatal."""

    run_id: str
    created_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    status: str = "pending"
    steps: dict[str, StepView] = field(default_factory=dict)
    hooks: dict[str, HookView] = field(default_factory=dict)
    waits: dict[str, WaitView] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)  # (kind, cid) in creation order
    phases: list[tuple[float, str]] = field(default_factory=list)
    """Run-level moments between steps: cancel requests, the saga unwind and its outcome."""
    batch_at: float | None = None
    before_batch_at: float | None = None

    def workflow_time(self) -> float | None:
        """What ``wayline.now()`` read when the current batch was decided: the time of the
        last event before it (one append stamps all its events with one time)."""
        return self.before_batch_at

    def apply(self, event: Event) -> None:
        t, cid, data, at = event.type, event.correlation_id or "", event.data, event.created_at
        if at != self.batch_at:
            self.before_batch_at, self.batch_at = self.batch_at, at
        if t is EventType.RUN_CREATED:
            self.created_at = at
        elif t is EventType.RUN_STARTED:
            self.started_at, self.status = at, "running"
        elif t in (EventType.RUN_COMPLETED, EventType.RUN_FAILED, EventType.RUN_CANCELLED):
            self.ended_at = at
            for hook in self.hooks.values():
                if hook.status == "waiting":
                    hook.status = "disposed"  # an ended run's hooks take no more payloads
            self.status = {
                EventType.RUN_COMPLETED: "completed",
                EventType.RUN_FAILED: "failed",
                EventType.RUN_CANCELLED: "cancelled",
            }[t]
        elif t in _PHASE_EVENTS:
            self.phases.append((at, phase_text(t, data)))
            self.order.append(("phase", str(len(self.phases) - 1)))
            if t in (EventType.RUN_COMPENSATING, EventType.RUN_COMPENSATION_RESUMED):
                self.status = "compensating"
            elif t is EventType.RUN_COMPENSATION_STUCK:
                self.status = "compensation_stuck"
        elif t is EventType.STEP_CREATED:
            compensates = data.get("compensates")
            self.steps[cid] = StepView(
                cid,
                str(data.get("stepName", cid)),
                at,
                compensates=str(compensates) if compensates else None,
            )
            self.order.append(("step", cid))
        elif cid in self.steps:
            self._apply_step(self.steps[cid], t, data, at)
        elif t is EventType.HOOK_CREATED:
            self.hooks[cid] = HookView(cid, str(data.get("token", "")), at)
            self.hooks[cid].type, self.hooks[cid].metadata = data.get("type"), data.get("metadata")
            self.order.append(("hook", cid))
        elif t is EventType.HOOK_RECEIVED and cid in self.hooks:
            hook = self.hooks[cid]
            if hook.received_at is None:
                hook.status, hook.received_at, hook.payload = "received", at, data.get("payload")
        elif t is EventType.HOOK_DISPOSED and cid in self.hooks:
            if self.hooks[cid].status == "waiting":
                self.hooks[cid].status = "disposed"
        elif t is EventType.WAIT_CREATED:
            resume_at = float(data.get("resumeAt") or at)
            timed = self.hooks.get(_timeout_of(cid))
            if timed is not None:
                timed.timeout_at = resume_at
            else:
                self.waits[cid] = WaitView(cid, at, resume_at, decided_at=self.workflow_time())
                self.order.append(("wait", cid))
        elif t is EventType.WAIT_COMPLETED:
            timed = self.hooks.get(_timeout_of(cid))
            if timed is not None:
                if timed.status == "waiting":
                    timed.status = "timed out"
            elif cid in self.waits:
                self.waits[cid].completed_at = at
                self.waits[cid].early = bool(data.get("early"))

    @staticmethod
    def _apply_step(step: StepView, t: EventType, data: Mapping[str, Any], at: float) -> None:
        if t is EventType.STEP_STARTED:
            number = int(data.get("attempt") or len(step.attempts) + 1)
            if step.attempts and step.attempts[-1].outcome == "running":
                step.attempts[-1].outcome = "abandoned"  # taken over (its owner died)
                step.attempts[-1].ended_at = at
            step.attempts.append(Attempt(number, at))
            step.status = "running"
        elif t in (EventType.STEP_RETRYING, EventType.STEP_COMPLETED, EventType.STEP_FAILED):
            outcome = {
                EventType.STEP_RETRYING: "retrying",
                EventType.STEP_COMPLETED: "completed",
                EventType.STEP_FAILED: "failed",
            }[t]
            attempt = step.attempts[-1] if step.attempts else None
            if attempt is None or attempt.outcome != "running":
                attempt = Attempt(len(step.attempts) + 1, at)
                step.attempts.append(attempt)
            attempt.ended_at, attempt.outcome = at, outcome
            attempt.error = data.get("error")
            if t is EventType.STEP_RETRYING:
                retry = data.get("retryAfter")
                attempt.retry_at = float(retry) if isinstance(retry, int | float) else None
                attempt.schedule = fmt_schedule(data)
                step.status = "retrying"
            else:
                step.status, step.ended_at = outcome, at
                step.result = data.get("result")
                step.error = data.get("error")

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [s.to_json() for s in self.steps.values()],
            "hooks": [h.to_json() for h in self.hooks.values()],
            "waits": [w.to_json() for w in self.waits.values()],
        }


_PHASE_EVENTS = frozenset(
    {
        EventType.RUN_CANCEL_REQUESTED,
        EventType.RUN_COMPENSATING,
        EventType.RUN_COMPENSATION_STUCK,
        EventType.RUN_COMPENSATION_RESUMED,
        EventType.RUN_COMPENSATION_ABANDONED,
    }
)


def phase_text(t: EventType, data: Mapping[str, Any]) -> str:
    if t is EventType.RUN_CANCEL_REQUESTED:
        return f"cancel requested ({data.get('reason') or 'no reason given'})"
    if t is EventType.RUN_COMPENSATING:
        why = data.get("reason")
        if why == "failed":
            return f"run failed, compensating: {fmt_error(data.get('error'))}"
        return f"run {why or 'ended'}, compensating completed steps (latest first)"
    if t is EventType.RUN_COMPENSATION_STUCK:
        return (
            f"compensation stuck: reversing step {data.get('step')} failed: "
            f"{fmt_error(data.get('error'))}"
        )
    if t is EventType.RUN_COMPENSATION_RESUMED:
        return "compensation resumed"
    return "compensation abandoned"


def _timeout_of(cid: str) -> str:
    return cid[: -len(".timeout")] if cid.endswith(".timeout") else ""


def fold(run_id: str, events: Iterable[Event]) -> Timeline:
    timeline = Timeline(run_id)
    for event in events:
        timeline.apply(event)
    return timeline


def unstick_commands(run_id: str, world_url: str) -> str:
    where = f"--world {shlex.quote(world_url)}"
    return (
        f"wayline runs resume-compensation {run_id} {where}   (try again), or\n"
        f"{'':27}wayline runs abandon-compensation {run_id} {where}"
    )


def resume_command(token: str, world_url: str) -> str:
    return (
        f"wayline hooks resume {shlex.quote(token)} --payload 'JSON' "
        f"--world {shlex.quote(world_url)}"
    )


class LiveProgress:
    """Prints a run's events as lines while it runs (``wayline run``, the demo)."""

    def __init__(self, out: TextIO, world_url: str) -> None:
        self.out = out
        self.world_url = world_url
        self.timeline: Timeline | None = None
        self.origin: float | None = None

    def _line(self, at: float, text: str) -> None:
        if self.origin is None:
            self.origin = at
        print(f"[{max(0.0, at - self.origin):7.2f}s] {text}", file=self.out, flush=True)

    def feed(self, events: list[Event]) -> None:
        for event in events:
            if self.timeline is None:
                self.timeline = Timeline(event.run_id)
            self.timeline.apply(event)
            self._print(event)

    def _print(self, event: Event) -> None:
        tl = self.timeline
        assert tl is not None
        t, cid, data, at = event.type, event.correlation_id or "", event.data, event.created_at
        if t is EventType.RUN_CREATED:
            self._line(at, f"run {event.run_id} created (workflow {data.get('workflow')})")
        elif t is EventType.RUN_STARTED:
            self._line(at, "run started")
        elif t is EventType.RUN_COMPLETED:
            took = fmt_duration(at - tl.created_at) if tl.created_at else "-"
            self._line(at, f"run completed in {took}")
        elif t is EventType.RUN_FAILED:
            self._line(at, f"run failed: {fmt_error(data.get('error'))}")
        elif t is EventType.RUN_CANCELLED:
            self._line(at, f"run cancelled ({data.get('reason', '')})")
        elif t in _PHASE_EVENTS:
            self._line(at, phase_text(t, data))
            if t is EventType.RUN_COMPENSATION_STUCK:
                print(
                    f"{'':11}a person decides: {unstick_commands(event.run_id, self.world_url)}",
                    file=self.out,
                    flush=True,
                )
        elif cid in tl.steps:
            self._print_step(tl.steps[cid], t, at)
        elif t is EventType.HOOK_CREATED:
            self._line(at, f"hook {data.get('token')} waiting for a payload")
            print(
                f"{'':11}resume it with: {resume_command(str(data.get('token')), self.world_url)}",
                file=self.out,
                flush=True,
            )
        elif t is EventType.HOOK_RECEIVED and cid in tl.hooks:
            payload = tl.hooks[cid].payload
            self._line(at, f"hook {tl.hooks[cid].token} received {fmt_json(payload)}")
        elif t is EventType.WAIT_CREATED:
            hook = tl.hooks.get(_timeout_of(cid))
            resume_at = float(data.get("resumeAt") or at)
            decided = tl.workflow_time() or at
            if hook is not None:
                self._line(
                    at,
                    f"hook {hook.token} times out in {fmt_duration(resume_at - decided)} "
                    f"(at {fmt_clock(resume_at)})",
                )
            else:
                self._line(
                    at, f"sleep {fmt_duration(resume_at - decided)} (until {fmt_clock(resume_at)})"
                )
        elif t is EventType.WAIT_COMPLETED:
            hook = tl.hooks.get(_timeout_of(cid))
            if hook is not None:
                if hook.status == "timed out":
                    self._line(at, f"hook {hook.token} timed out")
            elif cid in tl.waits:
                early = " (woken early)" if tl.waits[cid].early else ""
                self._line(at, f"sleep {fmt_duration(tl.waits[cid].seconds)} done{early}")

    def _print_step(self, step: StepView, t: EventType, at: float) -> None:
        attempt = step.attempts[-1] if step.attempts else None
        if t is EventType.STEP_STARTED and attempt is not None:
            suffix = f" (attempt {attempt.number})" if attempt.number > 1 else ""
            self._line(at, f"step {step.label} started{suffix}")
        elif t is EventType.STEP_RETRYING and attempt is not None:
            wait = (
                ""
                if attempt.retry_at is None
                else f"; retry in {fmt_duration(attempt.retry_at - at)}"
                + (f" ({attempt.schedule})" if attempt.schedule else "")
            )
            self._line(
                at,
                f"step {step.label} attempt {attempt.number} failed: "
                f"{fmt_error(attempt.error)}{wait}",
            )
        elif t is EventType.STEP_COMPLETED and attempt is not None:
            took = fmt_duration(at - attempt.started_at)
            self._line(at, f"step {step.label} completed in {took}: {fmt_json(step.result, 80)}")
        elif t is EventType.STEP_FAILED:
            self._line(at, f"step {step.label} failed: {fmt_error(step.error)}")


def render_show(info: RunInfo, events: list[Event], out: TextIO, world_url: str = "URL") -> None:
    """The ``wayline runs show`` timeline."""
    tl = fold(info.run_id, events)
    origin = info.created_at

    def rel(at: float) -> str:
        return f"+{fmt_duration(at - origin)}"

    def p(text: str = "") -> None:
        print(text, file=out)

    revision = info.attributes.get("revision")
    p(f"run       {info.run_id}")
    p(f"workflow  {info.workflow}" + (f" (revision {revision})" if revision else ""))
    definition = info.attributes.get("definition")
    if isinstance(definition, dict) and definition.get("identity"):
        ident = str(definition["identity"])[:16]
        code = str(definition.get("codeHash"))[:16]
        strict = " (strict)" if definition.get("strictIdentity") else ""
        p(f"identity  {ident}  code {code}{strict}")
    p(f"status    {info.status}")
    if info.status.value == "blocked" and info.error:
        p(f"blocked   {info.error.get('message', '')}")
    p(f"created   {fmt_time(info.created_at)}")
    if info.started_at:
        p(f"started   {fmt_time(info.started_at)}")
    if info.ended_at:
        p(f"ended     {fmt_time(info.ended_at)} (took {fmt_duration(info.ended_at - origin)})")
    p(f"input     {fmt_json(human_input(info.input), 200)}")
    p()
    p("timeline")
    if info.started_at:
        p(f"  {rel(info.started_at):>10}  run started")
    for kind, cid in tl.order:
        if kind == "phase":
            at, text = tl.phases[int(cid)]
            p(f"  {rel(at):>10}  {text}")
        elif kind == "step":
            step = tl.steps[cid]
            tries = len(step.attempts)
            took = fmt_duration((step.ended_at or 0) - step.created_at) if step.ended_at else "-"
            p(
                f"  {rel(step.created_at):>10}  step {step.label:<20} {step.status:<10} "
                f"{tries} attempt{'s' if tries != 1 else ''}, {took}"
            )
            detailed = tries > 1 or step.status not in ("completed", "running")
            for a in step.attempts if detailed else []:
                took = fmt_duration(a.ended_at - a.started_at) if a.ended_at else "-"
                outcome = "failed" if a.outcome == "retrying" else a.outcome
                line = f"{'':14}attempt {a.number}: {outcome} after {took}"
                if a.error and a.outcome != "completed":
                    line += f": {fmt_error(a.error)}"
                if a.retry_at is not None and a.ended_at is not None:
                    line += f" (retried {fmt_duration(a.retry_at - a.ended_at)} later"
                    line += f"; {a.schedule})" if a.schedule else ")"
                p(line)
            if step.status == "completed":
                p(f"{'':14}result {fmt_json(step.result)}")
        elif kind == "hook":
            hook = tl.hooks[cid]
            p(f"  {rel(hook.created_at):>10}  hook {hook.token:<20} {hook.status}")
            if hook.type is not None:
                p(f"{'':14}type {hook.type}")
            if hook.metadata is not None:
                p(f"{'':14}metadata {fmt_json(hook.metadata)}")
            if hook.timeout_at is not None:
                p(f"{'':14}timeout at {fmt_time(hook.timeout_at)}")
            if hook.received_at is not None:
                p(
                    f"{'':14}received after {fmt_duration(hook.received_at - hook.created_at)}: "
                    f"{fmt_json(hook.payload)}"
                )
        else:
            wait = tl.waits[cid]
            state = "done" if wait.completed_at is not None else "waiting"
            if wait.early:
                state = "woken early"
            p(
                f"  {rel(wait.created_at):>10}  sleep {fmt_duration(wait.seconds):<19} {state} "
                f"(until {fmt_time(wait.resume_at)})"
            )
    if info.ended_at:
        p(f"  {rel(info.ended_at):>10}  run {info.status}")
    p()
    if info.status == "completed":
        p(f"result    {json.dumps(info.output, indent=2, default=str)}")
    elif info.error:
        p(f"error     {fmt_error(info.error)}")
    elif info.status == "compensation_stuck":
        p(f"stuck     a person decides: {unstick_commands(info.run_id, world_url)}")
    else:
        waiting = [h for h in tl.hooks.values() if h.status == "waiting"]
        for hook in waiting:
            p(f"waiting   for hook {hook.token}")


def human_input(stored: Any) -> Any:
    """A run's stored input as it was given: the one argument, or the list of them."""
    if isinstance(stored, Mapping) and set(stored) <= {"args", "kwargs"}:
        args = list(stored.get("args") or [])
        if not stored.get("kwargs"):
            return args[0] if len(args) == 1 else args
    return stored


def run_to_json(info: RunInfo) -> dict[str, Any]:
    return {
        "runId": info.run_id,
        "workflow": info.workflow,
        "status": str(info.status),
        "input": info.input,
        "output": info.output,
        "error": dict(info.error) if info.error else None,
        "createdAt": info.created_at,
        "startedAt": info.started_at,
        "endedAt": info.ended_at,
        "updatedAt": info.updated_at,
        "attributes": dict(info.attributes),
    }
