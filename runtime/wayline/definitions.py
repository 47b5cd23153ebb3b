"""``@wayline.workflow`` and ``@wayline.step``: what a user declares, and the step registry."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .context import maybe_replay
from .durations import Duration, to_seconds
from .errors import ConfigurationError
from .serde import Signature

F = TypeVar("F", bound=Callable[..., Any])

# Steps are code, found by name when a queued step message arrives. A name maps to one function;
# re-importing the same function (a script imported again as a module) replaces it.
_STEPS: dict[str, StepDefinition] = {}


class StepDefinition:
    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        max_retries: int,
        retry_delay: Duration,
        compensate: Callable[..., Any] | None = None,
        compensates: StepDefinition | None = None,
    ) -> None:
        if max_retries < 0:
            raise ConfigurationError(f"step {fn.__qualname__}: max_retries must be >= 0")
        self.fn = fn
        self.name = name or fn.__qualname__
        self.max_retries = max_retries
        self.retry_delay = to_seconds(retry_delay)
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = Signature(fn)
        self.compensates = compensates
        """For a compensation handler: the forward step it reverses."""
        self.compensation: StepDefinition | None = None
        if compensate is not None:
            self.compensation = StepDefinition(
                compensate,
                name=f"{self.name}:compensate",
                max_retries=max_retries,
                retry_delay=retry_delay,
                compensates=self,
            )
            _register(self.compensation)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        replay = maybe_replay()
        if replay is None:
            # Outside a workflow a step is its plain function (handy in unit tests).
            return self.fn(*args, **kwargs)
        return replay.call_step(self, args, kwargs)

    def __repr__(self) -> str:
        return f"<wayline step {self.name}>"


class WorkflowDefinition:
    def __init__(self, fn: Callable[..., Any], *, name: str | None, revision: int) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(f"@wayline.workflow needs an async def, got {fn!r}")
        self.fn = fn
        self.name = name or fn.__name__
        self.revision = revision
        self.signature = Signature(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<wayline workflow {self.name} rev {self.revision}>"


@overload
def step(fn: F, /) -> F: ...
@overload
def step(
    *,
    name: str | None = None,
    max_retries: int = 3,
    retry_delay: Duration = 1.0,
    compensate: Callable[..., Any] | None = None,
) -> Callable[[F], F]: ...
def step(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    max_retries: int = 3,
    retry_delay: Duration = 1.0,
    compensate: Callable[..., Any] | None = None,
) -> Any:
    """Declare a durable step. ``max_retries`` counts retries after the first try.

    ``compensate`` reverses it (a saga): when the run fails or is cancelled, every forward
    step that completed, or whose outcome is unknown, is compensated in reverse order. The
    handler gets the forward step's arguments; ``step_context()`` inside it has
    ``forward_idempotency_key`` and ``forward_result`` (None when the outcome is unknown:
    reconcile by key)."""

    def wrap(f: Callable[..., Any]) -> Any:
        definition = StepDefinition(
            f, name=name, max_retries=max_retries, retry_delay=retry_delay, compensate=compensate
        )
        _register(definition)
        return definition

    return wrap(fn) if fn is not None else wrap


def _register(definition: StepDefinition) -> None:
    existing = _STEPS.get(definition.name)
    if existing is not None and existing.fn.__qualname__ != definition.fn.__qualname__:
        raise ConfigurationError(
            f"two different steps are named {definition.name!r} "
            f"({existing.fn.__module__} and {definition.fn.__module__}); pass name= to one"
        )
    _STEPS[definition.name] = definition


@overload
def workflow(fn: F, /) -> F: ...
@overload
def workflow(*, name: str | None = None, revision: int = 1) -> Callable[[F], F]: ...
def workflow(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, revision: int = 1
) -> Any:
    """Declare a durable workflow on an ``async def``."""

    def wrap(f: Callable[..., Any]) -> Any:
        return WorkflowDefinition(f, name=name, revision=revision)

    return wrap(fn) if fn is not None else wrap


def find_step(name: str) -> StepDefinition | None:
    return _STEPS.get(name)
