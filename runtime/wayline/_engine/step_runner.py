"""Running one step body and classifying what happened. Writes nothing: the handler does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from opentelemetry import trace

from .. import metrics
from .._core import clock, limits
from .._core.definitions import StepDefinition
from .._core.retry import EXHAUSTED
from .._core.serde import decode, encode, error_to_dict
from .._sdk.context import StepContext, _step
from .._sdk.streams import StreamStore, attempt_streams, close_streams
from ..errors import RETRIES_EXHAUSTED, FatalError, RetryableError
from .fencing import run_body, run_sync_body, running_loop


@dataclass(frozen=True, slots=True)
class Completed:
    result: Any


@dataclass(frozen=True, slots=True)
class Retry:
    error: dict[str, Any]
    retry_after: float
    """Absolute time (epoch seconds) of the next attempt."""
    schedule: dict[str, Any] = field(default_factory=dict)
    """How the delay was chosen (attempt, delay, policy), recorded for ``runs show``."""
    pause: bool = False
    """The attempts ran out under ``on_exhausted="pause"``: the run pauses with this retry
    (``ending.record_outcome``), and the step's next attempt has a fresh budget."""


@dataclass(frozen=True, slots=True)
class Failed:
    error: dict[str, Any]


Outcome = Completed | Retry | Failed


def idempotency_key(
    run_id: str, step_name: str, occurrence: int, direction: str = "forward"
) -> str:
    """``run:step#occurrence:direction`` (seed 004). Never depends on the attempt."""
    return f"{run_id}:{step_name}#{occurrence}:{direction}"


async def run_step_body(
    definition: StepDefinition[..., Any],
    *,
    run_id: str,
    step_id: str,
    stored_input: Any,
    attempt: int,
    occurrence: int,
    forward_result: Any = None,
    world: StreamStore | None = None,
    owner: str | None = None,
    recovery: bool = False,
    key_run: str | None = None,
) -> Outcome:
    """Run one attempt of the step's body under its own span (``workflow.step``), counted in
    the step metrics. ``world`` (when given) stores what it writes with ``wayline.stream``,
    closed here once the step is settled. ``owner`` is the message that owns an inline body
    (seed 000), None for a queued one; ``recovery`` marks an owned recovery (the owner re-runs
    a body a dead delivery began). ``key_run``: the run id the idempotency key is made of, when
    it is not ``run_id`` (a fork's steps keep the keys of the run it was forked from:
    ``_core.forks.KEY_RUN``)."""
    started, completed, retried, failed = _counters(definition.name)
    started.inc()
    attempt_of = partial(
        _attempt,
        definition,
        run_id=run_id,
        step_id=step_id,
        stored_input=stored_input,
        attempt=attempt,
        occurrence=occurrence,
        forward_result=forward_result,
        world=world,
        key_run=key_run or run_id,
    )
    if not _tracing():  # the API's no-op tracer: no span to build, name or end
        outcome = await attempt_of()
        if isinstance(outcome, Completed):
            completed.inc()
        elif isinstance(outcome, Retry):
            retried.inc()
        else:
            failed.inc()
        return outcome
    attributes: dict[str, Any] = {
        "workflow.run.id": run_id,
        "workflow.step.name": definition.name,
        "workflow.step.id": step_id,
        "workflow.step.attempt": attempt,
        "workflow.step.direction": "forward" if definition.compensates is None else "compensate",
        "workflow.inline_ownership.owned": owner is not None,
        "workflow.inline_ownership.owned_recovery": recovery,
    }
    if owner is not None:
        attributes["workflow.inline_ownership.owner_message_id"] = owner
    with _tracer.start_as_current_span("workflow.step", attributes=attributes) as span:
        outcome = await attempt_of()
        if isinstance(outcome, Completed):
            completed.inc()
            span.set_attribute("workflow.step.outcome", "completed")
        elif isinstance(outcome, Retry):
            retried.inc()
            span.set_attribute("workflow.step.outcome", "retry")
            span.set_status(trace.StatusCode.ERROR, str(outcome.error.get("message", "")))
        else:
            failed.inc()
            span.set_attribute("workflow.step.outcome", "failed")
            span.set_status(trace.StatusCode.ERROR, str(outcome.error.get("message", "")))
        return outcome


def _tracing() -> bool:
    """Whether a tracer provider is installed (``telemetry.configure`` or the application's
    own). Without one the API's tracer is a no-op, and a step skips its span altogether:
    building, entering and leaving a span nobody records was most of a no-op step's tracing
    cost. Asked per step, so a provider installed later is used from then on."""
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


_COUNTERS: dict[str, tuple[Any, Any, Any, Any]] = {}


def _counters(name: str) -> tuple[Any, Any, Any, Any]:
    """The step's started / completed / retried / failed counters (one label lookup each per
    step name, not per body)."""
    found = _COUNTERS.get(name)
    if found is None:
        found = _COUNTERS[name] = (
            metrics.STEP_BODIES_STARTED.labels(name),
            metrics.STEP_BODIES_COMPLETED.labels(name),
            metrics.STEP_BODIES_RETRIED.labels(name),
            metrics.STEP_BODIES_FAILED.labels(name),
        )
    return found


_tracer = trace.get_tracer("wayline")


async def _attempt(
    definition: StepDefinition[..., Any],
    *,
    run_id: str,
    step_id: str,
    stored_input: Any,
    attempt: int,
    occurrence: int,
    forward_result: Any,
    world: StreamStore | None,
    key_run: str,
) -> Outcome:
    forward = definition.compensates
    started_at = datetime.fromtimestamp(clock.now(), UTC)
    if forward is None:
        ctx = StepContext(
            run_id=run_id,
            step_name=definition.name,
            step_id=step_id,
            attempt=attempt,
            idempotency_key=idempotency_key(key_run, definition.name, occurrence),
            started_at=started_at,
        )
    else:  # a compensation: its own key, and the forward step's key and result
        ctx = StepContext(
            run_id=run_id,
            step_name=forward.name,
            step_id=step_id,
            attempt=attempt,
            idempotency_key=idempotency_key(key_run, forward.name, occurrence, "compensate"),
            direction="compensate",
            forward_idempotency_key=idempotency_key(key_run, forward.name, occurrence),
            forward_result=decode(
                forward_result, forward.signature.return_hint, what=f"result of {forward.name!r}"
            )
            if forward_result is not None
            else None,
            started_at=started_at,
        )
    with attempt_streams(world, run_id, step_id, attempt, running_loop()) as streams:
        outcome = await _body(definition, ctx, stored_input, attempt)
    if not isinstance(outcome, Retry):  # the step is settled: its streams end here
        await close_streams(streams, "completed" if isinstance(outcome, Completed) else "failed")
    return outcome


async def _body(
    definition: StepDefinition[..., Any], ctx: StepContext, stored_input: Any, attempt: int
) -> Outcome:
    what = f"step {definition.name!r}"
    token = _step.set(ctx)
    try:
        args, kwargs = definition.signature.decode_args(stored_input, what=what)
        name, fn, timeout = definition.name, definition.fn, definition.timeout
        if definition.is_async:
            value = await run_body(lambda: fn(*args, **kwargs), timeout, step=name)
            result = encode(value, what=f"result of {what}")
        else:

            def encoded() -> Any:  # in the body's thread: encoding may run the body's work
                # (a generator's rows), which must not block the loop or escape its timeout
                return encode(fn(*args, **kwargs), what=f"result of {what}")

            result = await run_sync_body(encoded, timeout, name)
        limits.check(result, "result", f"the result of {what}")
        return Completed(result)
    except FatalError as err:
        return _failed(definition, attempt, err, f"{type(err).__name__} is never retried")
    except RetryableError as err:  # its retry_after wins over the policy, for one attempt
        return _retry_or_fail(definition, attempt, err, err.retry_after, ctx.idempotency_key)
    except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
        raise  # the process or the delivery is stopping: not the body's own failure
    except BaseException as err:  # an Exception, or another the body raised (gevent's Timeout)
        if not definition.retry.retryable(err):
            return _failed(definition, attempt, err, f"{type(err).__name__} is non-retryable")
        return _retry_or_fail(definition, attempt, err, None, ctx.idempotency_key)
    finally:
        _step.reset(token)


def _retry_or_fail(
    definition: StepDefinition[..., Any],
    attempt: int,
    err: BaseException,
    retry_after: float | None,
    key: str,
) -> Outcome:
    policy = definition.retry
    if attempt > policy.max_retries:
        if policy.on_exhausted == "pause":
            # the run pauses instead of failing: the error says which attempt ran out, in
            # its own fields, as a failure's does, and the unpause grants a fresh budget
            error = _failed(definition, attempt, err, RETRIES_EXHAUSTED).error
            exhausted = {"attempt": attempt, "delay": 0.0, "source": EXHAUSTED}
            return Retry(error, clock.now(), exhausted | {"policy": policy.describe()}, True)
        return _failed(definition, attempt, err, RETRIES_EXHAUSTED)
    error = error_to_dict(err)
    if retry_after is None:
        delay, source = policy.delay(attempt, key), "policy"
    else:
        delay, source = retry_after, "retry_after"
    schedule = {"attempt": attempt, "delay": delay, "source": source, "policy": policy.describe()}
    return Retry(error, clock.now() + delay, schedule)


def _failed(
    definition: StepDefinition[..., Any], attempt: int, err: BaseException, why: str
) -> Failed:
    """The step's last attempt failed: its error keeps the body's message untouched, and
    says which attempt of how many it was and why no other follows, each in its own field
    (``wayline.ErrorCause``)."""
    error = error_to_dict(err)
    error["attempt"] = attempt
    error["attempts"] = definition.retry.max_retries + 1
    error["notRetriedBecause"] = why
    return Failed(error)
