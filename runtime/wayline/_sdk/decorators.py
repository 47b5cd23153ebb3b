"""``@wayline.step`` and ``@wayline.workflow``: how a user declares code as durable.

The decorators keep the declared function's signature (``ParamSpec``/``TypeVar``): a step
``async def charge(order: str) -> Receipt`` becomes a ``StepDefinition[[str], Receipt]``, so
``await charge(order)`` inside a workflow is a ``Receipt`` to a type checker and
``charge(1, 2)`` is an error. A plain ``def`` step is awaited the same way (it runs in a thread).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from .._core.concurrency import Limit
from .._core.debounce import Debounce
from .._core.definitions import StepDefinition, WorkflowDefinition, register, register_workflow
from .._core.rate_limits import RateLimit
from .._core.retry import RetryPolicy
from ..durations import Duration
from ..errors import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")


class StepDecorator(Protocol):
    """What ``@wayline.step(...)`` with options returns."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> StepDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> StepDefinition[P, R]: ...


class CompensatedStepDecorator(Protocol[P]):
    """What ``@wayline.step(compensate=undo, ...)`` returns: it takes only a function that
    accepts every call ``undo`` accepts, since a compensation is called with the forward
    step's arguments (a mismatch would otherwise show only when the run unwinds).

    The check runs that way round, and the step is typed by ``undo``'s parameters, because
    ``P`` is fixed by ``undo`` before the step's function is seen: a type checker cannot then
    take the step's own parameters and ask ``undo`` to accept them. With ``undo`` taking the
    step's parameters, as it should, both are the same."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> StepDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> StepDefinition[P, R]: ...


class WorkflowDecorator(Protocol):
    """What ``@wayline.workflow(...)`` with options returns."""

    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> WorkflowDefinition[P, R]: ...


@overload
def step(fn: Callable[P, Awaitable[R]], /) -> StepDefinition[P, R]: ...
@overload
def step(fn: Callable[P, R], /) -> StepDefinition[P, R]: ...
@overload
def step(
    *,
    name: str | None = None,
    max_retries: int | None = None,
    retry_delay: Duration | None = None,
    retry: RetryPolicy | None = None,
    compensate: Callable[P, Any],
    compensate_retry: RetryPolicy | None = None,
    timeout: Duration | None = None,
    concurrency: Limit | None = None,
    rate_limit: RateLimit | None = None,
) -> CompensatedStepDecorator[P]: ...
@overload
def step(
    *,
    name: str | None = None,
    max_retries: int | None = None,
    retry_delay: Duration | None = None,
    retry: RetryPolicy | None = None,
    compensate: None = None,
    compensate_retry: RetryPolicy | None = None,
    timeout: Duration | None = None,
    concurrency: Limit | None = None,
    rate_limit: RateLimit | None = None,
) -> StepDecorator: ...
def step(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    max_retries: int | None = None,
    retry_delay: Duration | None = None,
    retry: RetryPolicy | None = None,
    compensate: Callable[..., Any] | None = None,
    compensate_retry: RetryPolicy | None = None,
    timeout: Duration | None = None,
    concurrency: Limit | None = None,
    rate_limit: RateLimit | None = None,
) -> Any:
    """Declare a durable step. ``max_retries`` counts retries after the first try (default 3),
    ``retry_delay`` is the fixed pause between them (default 1s); ``retry`` takes a
    :class:`wayline.RetryPolicy` instead (backoff, a cap, jitter, non-retryable errors).

    ``timeout`` (``"2h"``, seconds) is for a step that needs longer than the worker's
    invocation bound: it never runs inline, runs as its own queued delivery, which its worker
    renews while the body runs and is below the timeout; past it, the attempt is cut off
    (``INVOCATION_FENCED``) and retried like any failure. Without it, a body still running at
    the bound is cut off the same way.

    ``concurrency=wayline.Limit(key=..., max=n)`` lets at most ``n`` bodies of the step with
    the same key (a function of the step's arguments; none: one pool for the step) run at
    once across every worker on the world. The step then runs as its own queued delivery,
    which takes a leased slot before the attempt starts; waiting for one spends no retry and
    no delivery, and shows in ``runs show`` (see ``wayline.Limit``).

    ``rate_limit=wayline.RateLimit(key=..., rate="100/s", burst=n)`` lets bodies of the step
    with the same key start at most at that rate across every worker on the world (a token
    bucket in the world). The step then runs as its own queued delivery, which takes a token
    before the attempt starts; waiting for one spends no retry and no delivery, and shows in
    ``runs show`` with the time its token is due (see ``wayline.RateLimit``).

    ``compensate`` reverses it (a saga): when the run fails or is cancelled, every forward
    step that completed, or whose outcome is unknown, is compensated in reverse order. The
    handler gets the forward step's arguments; ``step_context()`` inside it has
    ``forward_idempotency_key`` and ``forward_result`` (None when the outcome is unknown:
    reconcile by key). A type checker refuses a step whose arguments the handler cannot take
    (see ``CompensatedStepDecorator``).

    ``compensate_retry`` takes a :class:`wayline.RetryPolicy` for the compensation alone.
    Without it the compensation is retried as this step is (its ``retry``, or its
    ``max_retries``/``retry_delay``), unless ``compensate`` is itself a ``@wayline.step``
    declared with ``retry=``, ``max_retries=`` or ``retry_delay=``: then that step's policy
    applies. ``compensate_retry`` wins over both."""

    if retry is not None and (max_retries is not None or retry_delay is not None):
        raise ConfigurationError(
            "@wayline.step takes retry= or max_retries=/retry_delay=, not both "
            "(RetryPolicy(max_attempts=max_retries + 1, initial=retry_delay, backoff=1.0))"
        )

    def wrap(f: Callable[..., Any]) -> StepDefinition[..., Any]:
        definition = StepDefinition[..., Any](
            f,
            name=name,
            max_retries=3 if max_retries is None else max_retries,
            retry_delay=1.0 if retry_delay is None else retry_delay,
            compensate=compensate,
            timeout=timeout,
            retry=retry,
            concurrency=concurrency,
            rate_limit=rate_limit,
            compensate_retry=compensate_retry,
            retry_declared=(
                retry is not None or max_retries is not None or retry_delay is not None
            ),
        )
        register(definition)
        return definition

    return wrap(fn) if fn is not None else wrap


@overload
def workflow(fn: Callable[P, Awaitable[R]], /) -> WorkflowDefinition[P, R]: ...
@overload
def workflow(
    *,
    name: str | None = None,
    revision: int = 1,
    strict_identity: bool = False,
    concurrency: Limit | None = None,
    attributes: Mapping[str, Any] | None = None,
    rate_limit: RateLimit | None = None,
    debounce: Debounce | None = None,
) -> WorkflowDecorator: ...
def workflow(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    revision: int = 1,
    strict_identity: bool = False,
    concurrency: Limit | None = None,
    attributes: Mapping[str, Any] | None = None,
    rate_limit: RateLimit | None = None,
    debounce: Debounce | None = None,
) -> Any:
    """Declare a durable workflow on an ``async def``.

    ``concurrency=wayline.Limit(key=..., max=n)`` lets at most ``n`` runs with the same key
    be live at once, across every worker on the world (see ``wayline.Limit``).

    ``rate_limit=wayline.RateLimit(key=..., rate="1000/h", burst=n)`` lets runs with the same
    key start at most at that rate across every worker on the world: a run takes a token
    before its first event of work (after its concurrency slot) and waits, ``blocked`` with
    ``waitingFor: rate_limit``, until one is due (see ``wayline.RateLimit``).

    ``debounce=wayline.Debounce(key=..., period="30s")``: a ``Client.start`` that finds a run
    with the same key not yet begun returns that run's handle and replaces its input with its
    own; the run begins once ``period`` passed with no further start for the key (see
    ``wayline.Debounce``).

    ``attributes={"team": "billing"}``: search attributes every run of it starts with
    (docs/sdk.md, "Search attributes"); a start's own ``StartOptions(attributes=...)`` win
    key by key. Checked here: a bad name or value is an :class:`InvalidAttributesError`.

    Bump ``revision`` when behaviour changes without the shape changing; a run is only ever
    driven by a definition with its identity and revision (and, with ``strict_identity``, its
    exact code)."""

    def wrap(f: Callable[..., Any]) -> WorkflowDefinition[..., Any]:
        definition = WorkflowDefinition[..., Any](
            f,
            name=name,
            revision=revision,
            strict_identity=strict_identity,
            concurrency=concurrency,
            attributes=attributes,
            rate_limit=rate_limit,
            debounce=debounce,
        )
        register_workflow(definition, explicit_name=name is not None)
        return definition

    return wrap(fn) if fn is not None else wrap
