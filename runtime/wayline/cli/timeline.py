"""Runs as people read them: a run's event log folded into steps, hooks and waits, printed
live while it runs (``wayline run``) or as a timeline afterwards (``wayline runs show``)."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Container, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO, assert_never

from .._core import search_attributes
from .._core.events import Event, EventType, RunStatus
from .._core.forks import forked_from
from .._core.projections import (
    AttributesSet,
    ChildCompleted,
    ChildCreated,
    HistoryLarge,
    HookCreated,
    HookDisposed,
    HookReceived,
    PatchMarked,
    Payload,
    Reversal,
    RunBlocked,
    RunCancelled,
    RunCancelRequested,
    RunCompensating,
    RunCompensationAbandoned,
    RunCompensationResumed,
    RunCompensationStuck,
    RunCompleted,
    RunContinuedAsNew,
    RunCreated,
    RunDebounced,
    RunFailed,
    RunPaused,
    RunRedriven,
    RunStarted,
    RunUnblocked,
    RunUnpaused,
    RunView,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StepStarted,
    StepView,
    WaitCompleted,
    WaitCreated,
    deadline_of,
    debounced_until,
    payload,
    timeout_of,
)
from .._core.projections import fold as fold
from .._core.retry import EXHAUSTED
from ..history import fmt_error as fmt_error
from ..world import RunInfo


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)  # NaN too
    if seconds == float("inf"):  # a duration may be (``max_interval=math.inf``): no round()
        return "forever"
    # what would print as "1000 ms" is "1.00 s"; the product is tested, as it is what prints
    # (0.9994999999999999 < 0.9995, but times 1000 it is 999.5, which rounds up)
    if seconds * 1000 < 999.5:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 59.995:  # and "60.00 s" is "1m 00s"
        return f"{seconds:.2f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def fmt_time(epoch: float | None) -> str:
    if epoch is None or epoch <= 0:
        return "-"
    return _local(epoch, "%Y-%m-%d %H:%M:%S")


def fmt_clock(epoch: float) -> str:
    return _local(epoch, "%H:%M:%S")


def _local(epoch: float, fmt: str) -> str:
    """A time in the local zone; one no ``datetime`` holds (a wait past the year 9999, or
    ``inf``, which versions before ``replay.LATEST_WAIT_END`` recorded) is said, not raised."""
    try:
        return datetime.fromtimestamp(epoch).astimezone().strftime(fmt)
    except (OverflowError, ValueError, OSError):
        return "never" if epoch == float("inf") else "after the year 9999"


def fmt_json(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


Timeline = RunView
"""A run's log as people read it: the one projection (``wayline._core.projections``)."""


def fmt_schedule(data: Mapping[str, Any]) -> str:
    """A step_retrying event's schedule (``StepRetrying.schedule``): which attempt of how
    many, and what set the delay."""
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


def phase_text(p: Payload) -> str:
    """One run-level moment (a cancel request, the unwind and its outcome) as a line."""
    if isinstance(p, RunCancelRequested):
        return f"cancel requested ({p.reason or 'no reason given'})"
    if isinstance(p, RunCompensating):
        why = p.unwind.get("reason")
        if why == "failed":
            return f"run failed, compensating: {fmt_error(p.unwind.get('error'))}"
        return f"run {why or 'ended'}, compensating completed steps (latest first)"
    if isinstance(p, RunCompensationStuck):
        waiting = f"; waiting to run: {', '.join(map(str, p.not_run))}" if p.not_run else ""
        return f"compensation stuck: reversing step {p.step} failed: {fmt_error(p.error)}{waiting}"
    if isinstance(p, RunCompensationResumed):
        return "compensation resumed"
    if isinstance(p, RunCompensationAbandoned):
        return f"compensation abandoned{not_run_text(p.not_run)}"
    if isinstance(p, RunPaused):
        return f"paused by {p.by}: {p.reason or 'no reason given'}"
    if isinstance(p, RunUnpaused):
        return f"unpaused by {p.by}: {p.reason or 'no reason given'}"
    if isinstance(p, RunRedriven):
        why = p.reason or "no reason given"
        return f"redriven by {p.by} from step {p.step} ({p.step_id}), a fresh budget: {why}"
    return "compensation abandoned"


def not_run_text(not_run: tuple[Reversal, ...] | None) -> str:
    """What an abandon gave up without trying, as a tail of its line ('' in an older log,
    which did not record it)."""
    if not_run is None:
        return ""
    if not not_run:
        return "; every other reversal had run"
    return f"; not run: {', '.join(str(r) for r in not_run)}"


def abandoned_text(run_id: str, not_run: tuple[Reversal, ...] | None) -> str:
    """What ``wayline runs abandon-compensation`` prints: the reversals it gives up untried."""
    head = f"compensation of {run_id} abandoned: a worker ends the run"
    if not_run is None:
        return f"{head}\n(the worker that parked it did not record which reversals were left)"
    if not not_run:
        return f"{head}\nno reversal is left untried: every other one had run"
    listed = "".join(f"\n  {r}" for r in not_run)
    return f"{head}\nnot run, and never will be (latest first):{listed}"


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
        cid, at = event.correlation_id or "", event.created_at
        match p := payload(event):
            case RunCreated(workflow):
                self._line(at, f"run {event.run_id} created (workflow {workflow})")
            case RunStarted():
                self._line(at, "run started")
            case RunCompleted():
                took = fmt_duration(at - tl.created_at) if tl.created_at else "-"
                self._line(at, f"run completed in {took}")
            case RunFailed(error):
                self._line(at, f"run failed: {fmt_error(error)}")
            case RunCancelled(reason, terminated):
                how = "terminated, no compensations ran: " if terminated else ""
                self._line(at, f"run cancelled ({how}{reason})")
            case RunContinuedAsNew(next_run_id):
                self._line(at, f"run continued as new \u2192 {next_run_id}")
            case RunCompensationStuck():
                self._line(at, phase_text(p))
                self._more(f"a person decides: {unstick_commands(event.run_id, self.world_url)}")
            case (
                RunCancelRequested()
                | RunCompensating()
                | RunCompensationResumed()
                | RunCompensationAbandoned()
                | RunPaused()
                | RunUnpaused()
                | RunRedriven()
            ):
                self._line(at, phase_text(p))
            case StepStarted() | StepRetrying() | StepCompleted() | StepFailed():
                if cid in tl.steps:
                    self._print_step(tl.steps[cid], event.type, at)
            case HookCreated(token):
                self._line(at, f"hook {token} waiting for a payload")
                self._more(f"resume it with: {resume_command(token, self.world_url)}")
            case HookReceived(value):
                if cid in tl.hooks:
                    self._line(at, f"hook {tl.hooks[cid].token} received {fmt_json(value)}")
            case WaitCreated(resume_at):
                self._print_wait(cid, at if resume_at is None else resume_at, at)
            case WaitCompleted():
                timed = tl.hooks.get(timeout_of(cid))
                child = tl.child_views.get(deadline_of(cid))
                if timed is not None:
                    if timed.status == "timed out":
                        early = " (woken early)" if timed.timed_out_early else ""
                        self._line(at, f"hook {timed.token} timed out{early}")
                elif child is not None:
                    if child.deadline_passed_at == at:  # not when the child had ended first
                        early = " (woken early)" if child.deadline_early else ""
                        self._line(
                            at,
                            f"child {child.workflow} passed its deadline of "
                            f"{fmt_duration(child.deadline_seconds)}{early} (it runs on)",
                        )
                elif cid in tl.waits:
                    early = " (woken early)" if tl.waits[cid].early else ""
                    self._line(at, f"sleep {fmt_duration(tl.waits[cid].seconds)} done{early}")
            case ChildCreated(child_run_id, workflow):
                self._line(at, f"child {workflow} started: {child_run_id}")
            case ChildCompleted(status):
                child = tl.child_views.get(cid)
                name = child.workflow if child is not None else cid
                self._line(at, f"child {name} {status}")
            case AttributesSet(values):
                shown = ", ".join(
                    f"{k}={'(removed)' if v is None else search_attributes.shown(v)}"
                    for k, v in values.items()
                )
                self._line(at, f"attributes set: {shown}")
            case HistoryLarge(events, threshold):
                self._line(at, f"history large: {events} events (warned at {threshold})")
            case RunDebounced():
                self._line(at, "debounced: a later start replaced the input")
            case RunBlocked() | RunUnblocked() | StepCreated() | HookDisposed() | PatchMarked():
                pass
            case unknown:
                assert_never(unknown)

    def _more(self, text: str) -> None:
        print(f"{'':11}{text}", file=self.out, flush=True)

    def _print_wait(self, cid: str, resume_at: float, at: float) -> None:
        tl = self.timeline
        assert tl is not None
        hook = tl.hooks.get(timeout_of(cid))
        child = tl.child_views.get(deadline_of(cid))
        decided = tl.workflow_time() or at
        if child is not None:
            self._line(
                at,
                f"child {child.workflow} deadline in {fmt_duration(resume_at - decided)} "
                f"(at {fmt_clock(resume_at)})",
            )
        elif hook is not None:
            self._line(
                at,
                f"hook {hook.token} times out in {fmt_duration(resume_at - decided)} "
                f"(at {fmt_clock(resume_at)})",
            )
        else:
            self._line(
                at, f"sleep {fmt_duration(resume_at - decided)} (until {fmt_clock(resume_at)})"
            )

    def _print_step(self, step: StepView, t: EventType, at: float) -> None:
        attempt = step.attempts[-1] if step.attempts else None
        if t is EventType.STEP_STARTED and attempt is not None:
            suffix = f" (attempt {attempt.number})" if attempt.number > 1 else ""
            before = step.attempts[-2] if len(step.attempts) > 1 else None
            if before is not None and before.outcome == "abandoned":  # taken over just now
                suffix = (
                    f" (attempt {attempt.number}; attempt {before.number} abandoned, "
                    "no end recorded)"
                )
            self._line(at, f"step {step.label} started{suffix}")
        elif t is EventType.STEP_RETRYING and attempt is not None:
            schedule = fmt_schedule(attempt.schedule or {})
            wait = (
                ""
                if attempt.retry_at is None
                else f"; retry in {fmt_duration(attempt.retry_at - at)}"
                + (f" ({schedule})" if schedule else "")
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
            if attempt is not None and attempt.outcome == "abandoned":  # given up, not run
                self._line(
                    at, f"step {step.label} attempt {attempt.number} abandoned (no end recorded)"
                )
            self._line(at, f"step {step.label} failed: {fmt_error(step.error)}")


def _as_is(value: Any) -> Any:
    return value


def render_show(
    info: RunInfo,
    events: list[Event],
    out: TextIO,
    world_url: str = "URL",
    waiting: str | None = None,
    *,
    now: float | None = None,
    visibility_seconds: float | None = None,
    forks: Sequence[str] = (),
    result_limit: int | None = None,
    hook_payloads: Mapping[str, tuple[int, int]] | None = None,
    hooks_shown: Container[str] | None = None,
    view: RunView | None = None,
    noted: Callable[[Any], Any] | None = None,
) -> None:
    """The ``wayline runs show`` timeline (``waiting``: why no live worker can drive it;
    ``forks``: the runs forked from it). ``result_limit`` cuts the result line to that many
    characters, as the input line always is; None prints the result whole, as the command
    does for a person who asked for the run. ``hook_payloads``: by a hook's id, ``(first, last)``:
    print that many of its first and last payloads and how many are left out between them (the
    console's story of a run whose hooks were resumed thousands of times; a hook it does not
    name prints its first alone); None prints every one. ``hooks_shown``: the ids of the hooks
    to print (the console's run of thousands of hooks prints those its JSON carries, and how many
    it leaves out where it leaves out the first); None prints every hook.
    ``now`` and ``visibility_seconds`` (the world's) bound when a step whose body started and
    recorded no outcome is run again if the worker holding it died. ``view``: the run's fold
    of ``events`` when the caller has it already (the console keeps one), read and never
    changed here, so a log of 50,000 events is not folded a second time for its story;
    ``noted`` then turns each value of it the story prints (a step's result, a hook's payload
    and metadata) into what the story says of it, such as a blob's size in place of its
    reference."""
    tl = fold(info.run_id, events) if view is None else view
    shown = noted or _as_is
    origin = info.created_at

    def rel(at: float) -> str:
        return f"+{fmt_duration(at - origin)}"

    def p(text: str = "") -> None:
        print(text, file=out)

    definition = info.attributes.get("definition")
    revision = info.attributes.get("revision")
    if revision is None and isinstance(definition, dict):  # started by name: pinned later
        revision = definition.get("revision")
    p(f"run       {info.run_id}")
    if info.business_id is not None:
        p(f"id        {info.business_id}")
    p(f"workflow  {info.workflow}" + (f" (revision {revision})" if revision else ""))
    if isinstance(definition, dict) and definition.get("identity"):
        ident = str(definition["identity"])[:16]
        code = str(definition.get("codeHash"))[:16]
        strict = " (strict)" if definition.get("strictIdentity") else ""
        p(f"identity  {ident}  code {code}{strict}")
    parent = info.attributes.get("parent")
    if isinstance(parent, dict) and parent.get("runId"):
        p(f"parent    {parent['runId']} (as its child {parent.get('cid', '?')})")
    link = forked_from(info.attributes)
    if link is not None:
        p(
            f"forked    from {link['runId']} at step {link.get('step')}#"
            f"{link.get('occurrence')} ({link.get('stepId')})"
        )
    for fork in forks:
        p(f"fork      {fork}")
    if tl.history_large is not None:
        large = tl.history_large
        p(
            f"history   large: {large.events} events when warned (at {large.threshold}); "
            "end it with wayline.continue_as_new"
        )
    if info.continued_from is not None:
        p(f"chain     continued from {info.continued_from}")
    if tl.terminated and info.status is RunStatus.CANCELLED:
        waiting = "terminated: no compensations ran"  # an ended run waits for nothing
    p(f"status    {info.status}" + (f" ({waiting})" if waiting else ""))
    order = info.ordering
    p(f"priority  {order.priority}")
    if order.fairness_key:
        weight = f" (weight {order.fairness_weight})" if order.fairness_weight != 1 else ""
        p(f"fairness  {order.fairness_key}{weight}")
    for name, value in sorted(search_attributes.stored(info.attributes).items()):
        p(f"attribute {name}={search_attributes.shown(value)}")
    if info.status.value == "blocked" and info.error:
        p(f"blocked   {info.error.get('message', '')}")
    until = debounced_until(info, events)
    if until is not None:
        key = (info.attributes.get("debounce") or {}).get("key")
        p(f"debounced until {fmt_time(until)} unless started again with key {key!r}")
    if info.status is RunStatus.PAUSED and info.error:
        p(f"paused    by {info.error.get('by', '?')}: {info.error.get('message', '')}")
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
    left_out_hooks = 0
    for kind, cid in tl.order:
        if kind == "phase":
            at, moment = tl.phases[int(cid)]
            p(f"  {rel(at):>10}  {phase_text(moment)}")
        elif kind == "step":
            step = tl.steps[cid]
            tries = len(step.attempts)
            took = fmt_duration((step.ended_at or 0) - step.created_at) if step.ended_at else "-"
            # a step the run ended before (cancelled, terminated): it never will finish here
            cut = bool(info.ended_at) and step.status in ("pending", "running", "retrying")
            p(
                f"  {rel(step.created_at):>10}  step {step.label:<20} "
                f"{'unfinished' if cut else step.status:<10} "
                f"{tries} attempt{'s' if tries != 1 else ''}, {took}"
            )
            if cut:
                p(f"{'':14}the run ended first: no result recorded")
            detailed = tries > 1 or step.status not in ("completed", "running")
            for a in step.attempts if detailed else []:
                outcome = "failed" if a.outcome == "retrying" else a.outcome
                if a.ended_at is None:  # running, or abandoned: no end, so no duration
                    unknown = "no end recorded; " if a.outcome == "abandoned" else ""
                    line = f"{'':14}attempt {a.number}: {outcome} ({unknown}"
                    line += f"started {rel(a.started_at)})"
                else:
                    took = fmt_duration(a.ended_at - a.started_at)
                    line = f"{'':14}attempt {a.number}: {outcome} after {took}"
                if a.error and a.outcome != "completed":
                    line += f": {fmt_error(a.error)}"
                if (a.schedule or {}).get("source") == EXHAUSTED:
                    line += " (the run paused: the step's next attempt has a fresh budget)"
                elif a.retry_at is not None and a.ended_at is not None:
                    schedule = fmt_schedule(a.schedule or {})
                    line += f" (retried {fmt_duration(a.retry_at - a.ended_at)} later"
                    line += f"; {schedule})" if schedule else ")"
                p(line)
            last = step.attempts[-1] if step.attempts else None
            if step.status == "failed" and detailed and (last is None or last.outcome != "failed"):
                p(f"{'':14}gave up: {fmt_error(step.error)}")  # recorded without a body's end
            if step.status == "completed":
                p(f"{'':14}result {fmt_json(shown(step.result))}")
            if not cut and last is not None and last.outcome == "running":
                if not detailed:  # the attempts above name it otherwise
                    started = rel(last.started_at)
                    p(f"{'':14}attempt {last.number}: running (started {started})")
                p(f"{'':14}no outcome recorded yet: " + in_flight(now, visibility_seconds))
        elif kind == "hook" and hooks_shown is not None and cid not in hooks_shown:
            if not left_out_hooks:
                left_out_hooks = sum(1 for h in tl.hooks if h not in hooks_shown)
                p(f"{'':14}... {left_out_hooks} more hooks")
        elif kind == "hook":
            hook = tl.hooks[cid]
            early = " (woken early)" if hook.timed_out_early else ""
            named = f"{hook.token} (id {hook.cid})"  # the id `runs wake --wait` names it by
            p(f"  {rel(hook.created_at):>10}  hook {named:<20} {hook.status}{early}")
            if hook.type is not None:
                p(f"{'':14}type {hook.type}")
            if hook.metadata is not None:
                p(f"{'':14}metadata {fmt_json(shown(hook.metadata))}")
            if hook.timeout_at is not None:  # its wait id is what `runs wake --wait` takes
                p(f"{'':14}timeout at {fmt_time(hook.timeout_at)} (wait id {hook.cid}.timeout)")
            if hook.received_at is not None:
                payloads = [(hook.received_at, hook.payload), *hook.later]
                head, tail = (
                    (len(payloads), 0)
                    if hook_payloads is None
                    else hook_payloads.get(hook.cid, (1, 0))
                )
                left_out = len(payloads) - head - tail
                for n, (at, payload) in enumerate(payloads):
                    if left_out > 0 and head <= n < head + left_out:
                        if n == head:
                            more = "payload" if left_out == 1 else "payloads"
                            p(f"{'':14}... {left_out} more {more}")
                        continue
                    p(
                        f"{'':14}received after {fmt_duration(at - hook.created_at)}: "
                        f"{fmt_json(shown(payload))}"
                    )
        elif kind == "child":
            child = tl.child_views[cid]
            state = child.status
            if child.ended_at is None and info.ended_at:
                state = "not reported (the run ended)"
            took = (
                f" after {fmt_duration(child.ended_at - child.created_at)}"
                if child.ended_at
                else ""
            )
            p(f"  {rel(child.created_at):>10}  child {child.workflow:<19} {state}{took}")
            p(f"{'':14}run {child.run_id}")
            if child.deadline_at is not None:
                deadline = f"deadline {fmt_duration(child.deadline_seconds)}"
                if child.deadline_passed_at is not None:
                    early = " (woken early)" if child.deadline_early else ""
                    p(
                        f"{'':14}{deadline} passed at {rel(child.deadline_passed_at)}{early}: "
                        "the parent stopped waiting (the child runs on)"
                    )
                else:
                    p(
                        f"{'':14}{deadline} (at {fmt_time(child.deadline_at)}, "
                        f"wait id {cid}.deadline)"
                    )
        else:
            wait = tl.waits[cid]
            state = "done" if wait.completed_at is not None else "waiting"
            if wait.completed_at is None and info.ended_at:
                state = "not reached (the run ended)"
            if wait.early:
                state = "woken early"
            named = f"{fmt_duration(wait.seconds)} (id {cid})"  # as `runs wake --wait` takes
            p(
                f"  {rel(wait.created_at):>10}  sleep {named:<19} {state} "
                f"(until {fmt_time(wait.resume_at)})"
            )
    if info.ended_at:
        how = " by terminate (no compensations ran)" if tl.terminated else ""
        p(f"  {rel(info.ended_at):>10}  run {info.status}{how}")
    p()
    if info.continued_as is not None:
        p(f"chain     continued as new \u2192 {info.continued_as}")
    elif info.status == "completed":
        if result_limit is None:
            p(f"result    {json.dumps(info.output, indent=2, default=str)}")
        else:
            p(f"result    {fmt_json(info.output, result_limit)}")
    elif info.error and info.status is not RunStatus.PAUSED:  # its own line says why
        p(f"error     {fmt_error(info.error)}")
    elif info.status == "compensation_stuck":
        p(f"stuck     a person decides: {unstick_commands(info.run_id, world_url)}")
    else:
        for hook in [h for h in tl.hooks.values() if h.status == "waiting"]:
            p(f"waiting   for hook {hook.token} (id {hook.cid})")


def in_flight(now: float | None, visibility_seconds: float | None) -> str:
    """What a step whose body started and recorded no outcome waits for. The log says when
    the body started, not whether the worker holding its delivery is alive: a live worker
    renews the delivery (every third of the visibility), a dead one stops, and the world
    redelivers the step one visibility after the last renewal, which was no later than now.
    So ``now + visibility`` bounds the redelivery of a holder that has died. The ownership
    lease a start records (docs/ownership.md) does not delay it: the redelivered message is the
    owner's own and runs the body again at once; the lease bounds only other deliveries."""
    if now is None or visibility_seconds is None:
        return "waits for the worker that holds it"
    due = math.ceil(now + visibility_seconds)  # shown to the second: never before the bound
    return (
        "waits for the worker that holds it; if that worker died, a redelivery runs it again, "
        f"due by {fmt_time(due)}\n{'':14}(the world redelivers a step "
        f"{fmt_duration(visibility_seconds)} after its worker's last renewal of it)"
    )


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
        "businessId": info.business_id,
        "workflow": info.workflow,
        "priority": info.ordering.priority,
        "fairnessKey": info.ordering.fairness_key or None,
        "fairnessWeight": info.ordering.fairness_weight,
        "status": str(info.status),
        "input": info.input,
        "output": info.output,
        "error": dict(info.error) if info.error else None,
        "createdAt": info.created_at,
        "startedAt": info.started_at,
        "endedAt": info.ended_at,
        "updatedAt": info.updated_at,
        "attributes": dict(info.attributes),
        "searchAttributes": {
            k: search_attributes.shown(v)
            if isinstance(search_attributes.decode_value(v), datetime)
            else v
            for k, v in search_attributes.stored(info.attributes).items()
        },
    }
