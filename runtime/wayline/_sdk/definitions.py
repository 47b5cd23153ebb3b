"""``@wayline.workflow`` and ``@wayline.step``: what a user declares, and the step registry."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .._core.durations import Duration, to_seconds
from .._core.serde import Signature
from ..errors import ConfigurationError
from .context import maybe_replay
from .limits import Limit
from .retry import RetryPolicy

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
        retry: RetryPolicy | None = None,
    ) -> None:
        if max_retries < 0:
            raise ConfigurationError(f"step {fn.__qualname__}: max_retries must be >= 0")
        self.fn = fn
        self.name = name or fn.__qualname__
        # The simple form is a fixed-delay policy; max_retries/retry_delay stay readable.
        self.retry = retry or RetryPolicy(
            max_attempts=max_retries + 1, initial=to_seconds(retry_delay), backoff=1.0
        )
        self.max_retries = self.retry.max_retries
        self.retry_delay = to_seconds(self.retry.initial)
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
                retry=retry,
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
    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        revision: int,
        strict_identity: bool,
        concurrency: Limit | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(f"@wayline.workflow needs an async def, got {fn!r}")
        self.fn = fn
        self.name = name or fn.__name__
        self.revision = revision
        self.strict_identity = strict_identity
        if concurrency is not None and not isinstance(concurrency, Limit):
            raise ConfigurationError(f"concurrency= takes a wayline.Limit, not {concurrency!r}")
        self.concurrency = concurrency
        self.signature = Signature(fn)
        self._identity: str | None = None
        self._code_hash: str | None = None
        functools.update_wrapper(self, fn)

    @property
    def identity(self) -> str:
        """SHA-256 of the definition's shape (see ``wayline.identity``), computed on first use
        so that steps defined after the workflow in its module are seen."""
        if self._identity is None:
            from .identity import definition_identity

            self._identity = definition_identity(self)
        return self._identity

    @property
    def code_hash(self) -> str:
        if self._code_hash is None:
            from .identity import code_hash

            self._code_hash = code_hash(self)
        return self._code_hash

    def identity_record(self) -> dict[str, Any]:
        """What a run records about the definition that started it."""
        return {
            "identity": self.identity,
            "revision": self.revision,
            "codeHash": self.code_hash,
            "strictIdentity": self.strict_identity,
        }

    def mismatch(self, recorded: Any) -> str | None:
        """Why this definition may not drive a run that recorded ``recorded`` (None: it may)."""
        if not isinstance(recorded, dict):
            return None
        wanted, rev = recorded.get("identity"), recorded.get("revision")
        if wanted is not None and wanted != self.identity:
            return f"identity {str(wanted)[:12]} (this worker has {self.identity[:12]})"
        if rev is not None and rev != self.revision:
            return f"revision {rev} (this worker has revision {self.revision})"
        if recorded.get("strictIdentity") and recorded.get("codeHash") != self.code_hash:
            return (
                f"code {str(recorded.get('codeHash'))[:12]} (strict identity; this worker "
                f"has {self.code_hash[:12]})"
            )
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<wayline workflow {self.name} rev {self.revision}>"


@overload
def step(fn: Callable[..., Any], /) -> StepDefinition: ...
@overload
def step(
    *,
    name: str | None = None,
    max_retries: int | None = None,
    retry_delay: Duration | None = None,
    retry: RetryPolicy | None = None,
    compensate: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], StepDefinition]: ...
def step(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    max_retries: int | None = None,
    retry_delay: Duration | None = None,
    retry: RetryPolicy | None = None,
    compensate: Callable[..., Any] | None = None,
) -> Any:
    """Declare a durable step. ``max_retries`` counts retries after the first try (default 3),
    ``retry_delay`` is the fixed pause between them (default 1s); ``retry`` takes a
    :class:`wayline.RetryPolicy` instead (backoff, a cap, jitter, non-retryable errors).

    ``compensate`` reverses it (a saga): when the run fails or is cancelled, every forward
    step that completed, or whose outcome is unknown, is compensated in reverse order. The
    handler gets the forward step's arguments; ``step_context()`` inside it has
    ``forward_idempotency_key`` and ``forward_result`` (None when the outcome is unknown:
    reconcile by key)."""

    if retry is not None and (max_retries is not None or retry_delay is not None):
        raise ConfigurationError(
            "@wayline.step takes retry= or max_retries=/retry_delay=, not both "
            "(RetryPolicy(max_attempts=max_retries + 1, initial=retry_delay, backoff=1.0))"
        )

    def wrap(f: Callable[..., Any]) -> Any:
        definition = StepDefinition(
            f,
            name=name,
            max_retries=3 if max_retries is None else max_retries,
            retry_delay=1.0 if retry_delay is None else retry_delay,
            compensate=compensate,
            retry=retry,
        )
        _register(definition)
        return definition

    return wrap(fn) if fn is not None else wrap


def _register(definition: StepDefinition) -> None:
    existing = _STEPS.get(definition.name)
    if existing is None:
        _STEPS[definition.name] = definition
        return
    same_function = existing.fn.__qualname__ == definition.fn.__qualname__ and (
        existing.fn.__module__ == definition.fn.__module__
        or "__main__" in (existing.fn.__module__, definition.fn.__module__)
    )  # a script imported again as a module defines the same function twice
    if not same_function:
        raise ConfigurationError(
            f"two different steps are named {definition.name!r} "
            f"({existing.fn.__module__} and {definition.fn.__module__}); pass name= to one"
        )
    _STEPS[definition.name] = definition


@overload
def workflow(fn: Callable[..., Any], /) -> WorkflowDefinition: ...
@overload
def workflow(
    *,
    name: str | None = None,
    revision: int = 1,
    strict_identity: bool = False,
    concurrency: Limit | None = None,
) -> Callable[[Callable[..., Any]], WorkflowDefinition]: ...
def workflow(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    revision: int = 1,
    strict_identity: bool = False,
    concurrency: Limit | None = None,
) -> Any:
    """Declare a durable workflow on an ``async def``.

    ``concurrency=wayline.Limit(key=..., max=n)`` lets at most ``n`` runs with the same key
    be live at once, across every worker on the world (see ``wayline.Limit``).

    Bump ``revision`` when behaviour changes without the shape changing; a run is only ever
    driven by a definition with its identity and revision (and, with ``strict_identity``, its
    exact code)."""

    def wrap(f: Callable[..., Any]) -> Any:
        return WorkflowDefinition(
            f,
            name=name,
            revision=revision,
            strict_identity=strict_identity,
            concurrency=concurrency,
        )

    return wrap(fn) if fn is not None else wrap


def find_step(name: str) -> StepDefinition | None:
    return _STEPS.get(name)
