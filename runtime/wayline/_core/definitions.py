"""What a declared workflow or step *is* (``@wayline.workflow``/``@wayline.step`` build these,
see ``wayline._sdk.decorators``), and the step registry.

Both are generic in the declared function's parameters ``P`` and result ``R``, so a user's type
checker sees ``charge(order_id)`` inside a workflow as ``Awaitable[Receipt]`` and flags a wrong
argument.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

from ..durations import Duration, to_seconds
from ..errors import ConfigurationError
from . import patch_scopes, search_attributes
from .concurrency import Limit
from .current import replay_var
from .debounce import Debounce
from .identity import Entry, code_hash, digest
from .identity import shape as walk_shape
from .limits import Limits
from .limits import check as check_size
from .rate_limits import RateLimit
from .retry import RetryPolicy
from .serde import Signature

P = ParamSpec("P")
R = TypeVar("R")

# Steps are code, found by name when a queued step message arrives. A name maps to one function;
# re-importing the same function (a script imported again as a module) replaces it.
_STEPS: dict[str, StepDefinition[..., Any]] = {}
MOST_PATCHES = 4
"""How many step-adding patches one workflow may carry at once: a worker serves the identity
of every combination of them (2**4 = 16 routes per workflow at most, each a consumer)."""
# Workflows named after their function, to refuse two different ones under one implicit name.
_IMPLICIT_WORKFLOWS: dict[str, WorkflowDefinition[..., Any]] = {}


def _not_a_method(fn: Callable[..., Any]) -> None:
    """A step is a function: one defined in a class body would be called without its
    ``self`` (a step is not bound to an instance), and fail later with a missing argument."""
    owner, _, _ = getattr(fn, "__qualname__", "").rpartition(".")
    params = list(inspect.signature(fn).parameters)
    if owner and not owner.endswith("<locals>") and params[:1] in (["self"], ["cls"]):
        raise ConfigurationError(
            f"@wayline.step on the method {fn.__qualname__}: a step is a module-level (or "
            "nested) function, not bound to an instance; define it outside the class and "
            "pass what it needs as arguments"
        )


class StepDefinition(Generic[P, R]):
    """A declared step: ``R`` is what awaiting a call to it gives inside a workflow."""

    fn: Callable[..., Any]
    retry: RetryPolicy
    retry_declared: bool

    def __init__(
        self,
        fn: Callable[P, Any],
        *,
        name: str | None,
        max_retries: int,
        retry_delay: Duration,
        compensate: Callable[..., Any] | None = None,
        compensates: StepDefinition[..., Any] | None = None,
        timeout: Duration | None = None,
        retry: RetryPolicy | None = None,
        concurrency: Limit | None = None,
        compensate_retry: RetryPolicy | None = None,
        retry_declared: bool = False,
        rate_limit: RateLimit | None = None,
    ) -> None:
        if compensate_retry is not None and not isinstance(compensate_retry, RetryPolicy):
            raise ConfigurationError(
                f"step {fn.__qualname__}: compensate_retry= takes a wayline.RetryPolicy, "
                f"not {compensate_retry!r}"
            )
        if compensate_retry is not None and compensate is None:
            raise ConfigurationError(
                f"step {fn.__qualname__}: compensate_retry= without compensate= "
                "(there is no compensation to retry)"
            )
        if isinstance(compensate, StepDefinition):
            # a step given as a compensation: its function is this step's compensation (own
            # name and keys, the forward key and result), never a copy of that other step;
            # a retry policy that step declared is the one thing it lends the compensation
            if compensate_retry is None and compensate.retry_declared:
                compensate_retry = compensate.retry
            compensate = compensate.fn
        if max_retries < 0:
            raise ConfigurationError(f"step {fn.__qualname__}: max_retries must be >= 0")
        _not_a_method(fn)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"retry= takes a wayline.RetryPolicy, not {retry!r}")
        self.retry_declared = retry_declared or retry is not None
        """The step was declared with retry=, max_retries= or retry_delay= (not the
        defaults): given as another step's ``compensate=``, its policy goes with it."""
        self.timeout = None if timeout is None else to_seconds(timeout)
        """Start-to-close bound of one attempt: the step never runs inline, runs queue-owned
        and its worker renews the delivery up to this long (see ``_engine.fencing``)."""
        if self.timeout is not None and self.timeout <= 0:
            raise ConfigurationError(f"step {fn.__qualname__}: timeout must be > 0")
        _check_limit(concurrency)
        self.concurrency = concurrency
        """At most ``max`` bodies per key at once on the world: the step then never runs
        inline, and its queued delivery takes a leased slot first (``_engine.step_slots``)."""
        _check_rate_limit(rate_limit)
        self.rate_limit = rate_limit
        """Bodies started per key and second on the world: the step then never runs inline,
        and its queued delivery takes a token first (``_engine.rate_waits``)."""
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
        self.compensation: StepDefinition[..., Any] | None = None
        self.own_compensation_retry = compensate_retry is not None
        """The compensation has a policy of its own; without one it takes this step's."""
        if compensate is not None:
            self.compensation = StepDefinition[..., Any](
                compensate,
                name=f"{self.name}:compensate",
                max_retries=max_retries,
                retry_delay=retry_delay,
                compensates=self,
                retry=compensate_retry or self.retry,
            )
            register(self.compensation)
        functools.update_wrapper(self, fn, updated=())  # fn's __dict__ is not this step's

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        replay = replay_var.get()
        if replay is None:
            # Outside a workflow a step is its plain function (handy in unit tests).
            result: Awaitable[R] = self.fn(*args, **kwargs)
            return result
        future: Awaitable[R] = replay.call_step(self, args, kwargs)
        return future

    @property
    def queued_only(self) -> bool:
        """Never run inline: a ``timeout=`` step (its delivery is renewed up to the timeout)
        or a ``concurrency=`` or ``rate_limit=`` one (its delivery takes a slot or a token
        before the body starts)."""
        return (
            self.timeout is not None or self.concurrency is not None or self.rate_limit is not None
        )

    def identity_entry(self) -> Entry:
        options: dict[str, Any] = {
            "maxRetries": self.max_retries,
            "retryDelay": self.retry_delay,
            "compensates": self.compensation is not None,
        }
        if self.timeout is not None:  # absent before it existed: old identities hold
            options["timeout"] = self.timeout
        if self.compensation is not None and self.own_compensation_retry:
            # recorded as this step's own policy is, and only when it is not this step's
            # (absent before it existed: old identities hold), so a worker whose
            # compensation retries otherwise does not take over the run's unwind
            options["compensateRetry"] = {
                "maxRetries": self.compensation.max_retries,
                "retryDelay": self.compensation.retry_delay,
            }
        return ("step", self.name, options)

    def __repr__(self) -> str:
        return f"<wayline step {self.name}>"


def _check_limit(concurrency: object) -> None:
    if concurrency is not None and not isinstance(concurrency, Limit):
        raise ConfigurationError(f"concurrency= takes a wayline.Limit, not {concurrency!r}")


def _check_rate_limit(rate_limit: object) -> None:
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise ConfigurationError(f"rate_limit= takes a wayline.RateLimit, not {rate_limit!r}")


class WorkflowDefinition(Generic[P, R]):
    """A declared workflow: an ``async def`` taking ``P`` and returning ``R``."""

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        *,
        name: str | None,
        revision: int,
        strict_identity: bool,
        concurrency: Limit | None = None,
        attributes: Mapping[str, Any] | None = None,
        rate_limit: RateLimit | None = None,
        debounce: Debounce | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(f"@wayline.workflow needs an async def, got {fn!r}")
        self.fn = fn
        self.name = name or fn.__name__
        self.attributes = search_attributes.encode(attributes or {})
        """The search attributes every run of it starts with (stored form); a start's own
        ``StartOptions(attributes=...)`` win over them key by key."""
        self.revision = revision
        self.strict_identity = strict_identity
        _check_limit(concurrency)
        if concurrency is not None and concurrency.lease is not None:
            raise ConfigurationError(
                f"workflow {self.name!r}: Limit.lease is for steps (a run holds its slot "
                "until it ends)"
            )
        self.concurrency = concurrency
        _check_rate_limit(rate_limit)
        self.rate_limit = rate_limit
        """Runs started per key and second on the world: a run takes a token before its first
        event of work, after its concurrency slot (``_engine.rate_waits``)."""
        if debounce is not None and not isinstance(debounce, Debounce):
            raise ConfigurationError(f"debounce= takes a wayline.Debounce, not {debounce!r}")
        self.debounce = debounce
        """Starts with one key within the quiet period collapse into one run, which begins
        after it with the last input (``Client.start``; ``wayline.Debounce``)."""
        self.signature = Signature(fn)
        self._identity: str | None = None
        self._identities: tuple[str, ...] | None = None
        self._code_hash: str | None = None
        functools.update_wrapper(self, fn)

    def encode_input(
        self,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        limits: Limits | None = None,
    ) -> Any:
        """The stored form of a run's input, refused unless the worker will decode it against
        the signature (:class:`SerializationError`): the one check of ``Client.start`` and
        ``wayline start``/``run`` (``wayline.child`` makes its second half, ``check_input``),
        so a bad input is refused before a run exists, with the same message wherever it was
        given. The size limit is checked first (:class:`PayloadTooLargeError`; ``limits`` are
        the caller's settings', else the defaults): an oversized input is not decoded."""
        what = f"workflow {self.name!r}"
        stored = self.signature.encode_args(args, kwargs, what=what)
        check_size(stored, "input", f"the input of {what}", limits)
        self.check_input(stored, what=what)
        return stored

    def check_input(self, stored: Any, *, what: str) -> None:
        """Decode an encoded input as a worker will (the second half of ``encode_input``)."""
        self.signature.decode_args(stored, what=f"input of {what}")

    @property
    def identity(self) -> str:
        """SHA-256 of the definition's shape (see ``identity``), computed on first use so that
        steps defined after the workflow in its module are seen."""
        if self._identity is None:
            self._identity = definition_identity(self)
        return self._identity

    @property
    def identities(self) -> tuple[str, ...]:
        """The identities this definition can drive: its own first, then those of its older
        shapes, without the steps and children that only ``patched`` branches refer to (a run
        pinned before a patch never takes its branch; docs/durability.md, "Adding a step to a
        live workflow"). Under ``strict_identity`` its own only: the code is part of the pin.
        :class:`ConfigurationError` when more than ``MOST_PATCHES`` patches add steps."""
        if self._identities is None:
            older: list[str] = []
            if not self.strict_identity:
                found = patch_scopes.scopes(self.fn)
                try:
                    left = patch_scopes.older_shapes(found, MOST_PATCHES)
                except ValueError as err:
                    raise ConfigurationError(f"workflow {self.name!r}: {err}") from None
                older = [digest(shape(self, leave_out)) for leave_out in left]
            self._identities = tuple(dict.fromkeys([self.identity, *older]))
        return self._identities

    def identity_records(self) -> list[dict[str, Any]]:
        """``identity_record`` for each of ``identities``: the pins whose runs it drives."""
        return [{**self.identity_record(), "identity": i} for i in self.identities]

    @property
    def code_hash(self) -> str:
        if self._code_hash is None:
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
        if wanted is not None and wanted not in self.identities:
            return f"identity {str(wanted)[:12]} (this worker has {self.identity[:12]})"
        if rev is not None and rev != self.revision:
            return f"revision {rev} (this worker has revision {self.revision})"
        if recorded.get("strictIdentity") and recorded.get("codeHash") != self.code_hash:
            return (
                f"code {str(recorded.get('codeHash'))[:12]} (strict identity; this worker "
                f"has {self.code_hash[:12]})"
            )
        return None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        return self.fn(*args, **kwargs)

    def identity_entry(self) -> Entry:
        return ("workflow", self.name, {})

    def __repr__(self) -> str:
        return f"<wayline workflow {self.name} rev {self.revision}>"


def register(definition: StepDefinition[..., Any]) -> None:
    """Add a step to the registry (a name maps to one function)."""
    existing = _STEPS.get(definition.name)
    if existing is not None:
        _refuse_namesake("steps", existing, definition)
    _STEPS[definition.name] = definition


def _refuse_namesake(
    kind: str,
    existing: StepDefinition[..., Any] | WorkflowDefinition[..., Any],
    definition: StepDefinition[..., Any] | WorkflowDefinition[..., Any],
) -> None:
    same_function = existing.fn.__qualname__ == definition.fn.__qualname__ and (
        existing.fn.__module__ == definition.fn.__module__
        or "__main__" in (existing.fn.__module__, definition.fn.__module__)
    )  # a script imported again as a module defines the same function twice
    if not same_function:
        raise ConfigurationError(
            f"two different {kind} are named {definition.name!r} "
            f"({existing.fn.__module__}.{existing.fn.__qualname__} and "
            f"{definition.fn.__module__}.{definition.fn.__qualname__}); pass name= to one"
        )


def workflows_by_name(
    workflows: Iterable[WorkflowDefinition[..., Any]],
) -> dict[str, WorkflowDefinition[..., Any]]:
    """The workflows a worker or client serves, by name; two different ones under one name
    are refused (one would silently shadow the other, leaving its runs blocked for good)."""
    out: dict[str, WorkflowDefinition[..., Any]] = {}
    for definition in workflows:
        existing = out.get(definition.name)
        if existing is not None and existing is not definition:
            _refuse_namesake("workflows", existing, definition)
            if existing.identity_record() != definition.identity_record():
                raise ConfigurationError(
                    f"two different workflows are named {definition.name!r} (revision "
                    f"{existing.revision} and {definition.revision}); pass name= to one"
                )
        out[definition.name] = definition
    return out


def register_workflow(definition: WorkflowDefinition[..., Any], *, explicit_name: bool) -> None:
    """Remember a workflow named after its function, refusing a different one under that name
    (an explicit ``name=`` is deliberate, e.g. two revisions side by side)."""
    if explicit_name:
        return
    existing = _IMPLICIT_WORKFLOWS.get(definition.name)
    if existing is not None:
        _refuse_namesake("workflows", existing, definition)
    _IMPLICIT_WORKFLOWS[definition.name] = definition


def find_step(name: str) -> StepDefinition[..., Any] | None:
    return _STEPS.get(name)


def _entry(value: Any) -> Entry | None:
    if isinstance(value, StepDefinition | WorkflowDefinition):
        return value.identity_entry()
    return None


def shape(
    workflow: WorkflowDefinition[..., Any], leave_out: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The steps and children a workflow's code refers to (``identity.shape``)."""
    return walk_shape(workflow, _entry, leave_out)


def definition_identity(workflow: WorkflowDefinition[..., Any]) -> str:
    return digest(shape(workflow))
