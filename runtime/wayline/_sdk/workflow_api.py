"""Functions that only make sense inside a workflow function. Each finds the running replay
through a context variable and raises :class:`NotInWorkflowError` elsewhere."""

from __future__ import annotations

import builtins
import functools
import inspect
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, NoReturn, ParamSpec, TypeVar, overload

from typing_extensions import deprecated

from .._core.continuation import ContinueAsNew, ContinueAsNewError
from .._core.definitions import WorkflowDefinition
from .._core.futures import WFuture
from .._core.replay import Replay
from ..durations import Duration
from ..settings import Settings
from .context import current_replay
from .hooks import HookHandle, recorded
from .options import ChildOptions, take_option_keywords
from .webhooks import webhook_base, webhook_url

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")
T5 = TypeVar("T5")
T6 = TypeVar("T6")


def sleep(duration: Duration) -> WFuture[None]:
    """A durable sleep: survives restarts, re-armed on the time left."""
    return current_replay("sleep").sleep(duration)


@overload
def create_hook(
    token: str | None = None,
    *,
    timeout: Duration | None = None,
    type: builtins.type[T],
    metadata: Any = None,
    webhook: bool = False,
) -> HookHandle[T]: ...
@overload
def create_hook(
    token: str | None = None,
    *,
    timeout: Duration | None = None,
    type: Any = None,
    metadata: Any = None,
    webhook: bool = False,
) -> HookHandle[Any]: ...
def create_hook(
    token: str | None = None,
    *,
    timeout: Duration | None = None,
    type: Any = None,
    metadata: Any = None,
    webhook: bool = False,
) -> HookHandle[Any]:
    """A hook that someone resumes with a payload (``Client.resume_hook`` or the CLI).

    ``await hook`` gives the first payload, validated as ``type`` when given (and a resumer
    -- client, CLI, operator -- refuses a payload that does not validate before anything is
    written, as for a :class:`wayline.Hook`); with ``timeout`` it raises
    :class:`wayline.HookTimeout` if nothing arrives in time. ``metadata`` (any JSON)
    is recorded with the hook, for the people and tools that resume it.

    With ``webhook=True`` the handle's ``webhook_url`` is a signed URL under the console's
    address: a POST of JSON to it resumes the hook once, with no bearer token (docs/console.md,
    "Webhook URLs"). It needs ``WAYLINE_CONSOLE_URL`` and ``WAYLINE_WEBHOOK_SECRET``; without
    them this raises :class:`wayline.errors.ConfigurationError` and creates no hook."""
    replay = current_replay("create_hook")
    # checked first: a hook whose URL cannot be given is not created
    signing = webhook_base(Settings.from_env()) if webhook else None
    name, shape = recorded(type)
    record = replay.create_hook(token, timeout, type, metadata, name)
    record.shape = shape  # with the name: a resumer refuses a bad payload before writing it
    url = None if signing is None else webhook_url(*signing, record.token)
    return HookHandle(record, url)


@overload
def child(
    workflow: WorkflowDefinition[P, R], /, *args: P.args, **kwargs: P.kwargs
) -> WFuture[R]: ...
@overload
@deprecated("child(wf, ..., timeout=) is deprecated: use child_with(ChildOptions(timeout=), wf)")
def child(
    workflow: WorkflowDefinition[..., R], /, *args: Any, timeout: Duration, **kwargs: Any
) -> WFuture[R]: ...
def child(workflow: Any, /, *args: Any, **kwargs: Any) -> WFuture[Any]:
    """Start ``workflow`` as a child run owned by this one and wait for its result; every
    argument after ``workflow`` is the child's own. :func:`child_with` starts one with
    options.

    The parent claims the child before waiting on it, so a replay resumes the same child.
    Deprecated: ``timeout=`` as the option (now ``ChildOptions(timeout=...)``); it still acts
    as one, with a ``DeprecationWarning``, unless the child has a parameter named
    ``timeout``: then it is the child's argument."""
    _check_child(workflow)
    given = take_option_keywords(
        workflow,
        kwargs,
        ("timeout",),
        call="wayline.child",
        new_form="wayline.child_with(wayline.ChildOptions(timeout=...), workflow, ...)",
        stacklevel=2,
    )
    return child_with(ChildOptions(**given), workflow, *args, **kwargs)


def child_with(
    options: ChildOptions, workflow: WorkflowDefinition[P, R], /, *args: P.args, **kwargs: P.kwargs
) -> WFuture[R]:
    """:func:`child` as ``options`` say (see :class:`ChildOptions`: a timeout on the wait, a
    business id for the child)."""
    if not isinstance(options, ChildOptions):
        raise TypeError(f"wayline.child_with takes a wayline.ChildOptions first, not {options!r}")
    _check_child(workflow)
    future: WFuture[R] = current_replay("child").start_child(
        workflow, args, kwargs, options.timeout, business_id=options.id, priority=options.priority
    )
    return future


def _check_child(workflow: object) -> None:
    if not isinstance(workflow, WorkflowDefinition):
        raise TypeError(f"wayline.child needs a @wayline.workflow, got {workflow!r}")


def patched(patch_id: str) -> bool:
    """Whether this run takes a code change made under live runs (Temporal's
    ``workflow.patched``): True on new runs and on runs that reach this call after the change
    was deployed, False when replaying history written before it. Keep the old branch until
    no run started before the change is live::

        if wayline.patched("fraud-check"):
            await fraud_check(order)
    """
    return current_replay("patched").patched(patch_id)


def set_attributes(**values: Any) -> None:
    """Set search attributes of this run (Temporal's ``upsert_search_attributes``): str,
    int, float, bool, a timezone-aware datetime or a list of str; None removes one. Recorded
    in the log with the run's next write, so a replay sets the same values and writes nothing
    again; ``Client.list_runs(where=...)`` and ``wayline runs list --where`` find the run by
    them. A bad name or value raises :class:`InvalidAttributesError` at the call::

        wayline.set_attributes(tenant=order.tenant, amount=order.total)
    """
    current_replay("set_attributes").set_attributes(values)


def continue_as_new(*args: Any, **kwargs: Any) -> NoReturn:
    """End this run and go on in a fresh run of the same workflow with ``args`` and
    ``kwargs``, as Temporal's ``continue_as_new``: the run ends ``continued_as_new`` naming
    its next run, whose log starts empty, so a workflow that loops for ever keeps a bounded
    log. The next run keeps the run's business id (as its next generation), queue, memo,
    parent and search attributes; ``RunHandle.result()`` follows the chain to its last run.
    The next run is pinned afresh, by the worker that begins it: after a deploy, a chain goes
    on in the current version's code (:func:`continue_as_new_keeping_version` keeps it on
    this run's).

    Raises :class:`ContinueAsNewError` while a child run started here is still running (wait
    for it first: its end would have no run to report to). Hooks still waiting end with the
    run, and a step started and not awaited is not waited for. Never returns: it raises a
    signal the engine catches, which an ``except Exception`` does not swallow."""
    _may_continue("continue_as_new")
    raise ContinueAsNew(args, kwargs)


def continue_as_new_keeping_version(*args: Any, **kwargs: Any) -> NoReturn:
    """:func:`continue_as_new`, with the next run pinned to the definition this run runs
    (its worker identity and revision), as every run of the chain was before: for a workflow
    whose next run must not be begun by a newer deploy's code (its input is the old shape,
    say). It keeps that version's WorkflowWorker deployment alive while the chain loops."""
    _may_continue("continue_as_new_keeping_version")
    raise ContinueAsNew(args, kwargs, keep_version=True)


def _may_continue(call: str) -> None:
    replay = current_replay(call)
    running = [
        c.cid for c in (*replay.children.values(), *replay.new_children.values()) if not c.done
    ]
    if running:
        raise ContinueAsNewError(
            f"{call} with child runs still running ({', '.join(sorted(set(running)))}): "
            "await them (or let them end) first"
        )


def now() -> datetime:
    """Workflow time: moves only with the log, so a replay sees the same value."""
    return datetime.fromtimestamp(current_replay("now").now, UTC)


def random() -> float:
    """A deterministic random float in [0, 1), seeded by the run."""
    return current_replay("random").rng.random()


def uuid4() -> uuid.UUID:
    """A deterministic UUID4, seeded by the run."""
    rng = current_replay("uuid4").rng
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def _as_future(replay: Replay, aw: Awaitable[Any]) -> WFuture[Any]:
    if isinstance(aw, WFuture):
        return aw
    if isinstance(aw, HookHandle):
        return aw._record.first
    if inspect.iscoroutine(aw):
        return replay.spawn(aw)
    raise TypeError(f"wayline.gather/race take steps, sleeps, hooks or coroutines, not {aw!r}")


# One overload per count up to six keeps each argument's type in its place of the result
# (typeshed's ``asyncio.gather`` does the same); more, or a starred list, share one type.
@overload
def gather() -> WFuture[tuple[()]]: ...
@overload
def gather(a1: Awaitable[T1], /) -> WFuture[tuple[T1]]: ...
@overload
def gather(a1: Awaitable[T1], a2: Awaitable[T2], /) -> WFuture[tuple[T1, T2]]: ...
@overload
def gather(
    a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], /
) -> WFuture[tuple[T1, T2, T3]]: ...
@overload
def gather(
    a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], a4: Awaitable[T4], /
) -> WFuture[tuple[T1, T2, T3, T4]]: ...
@overload
def gather(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    /,
) -> WFuture[tuple[T1, T2, T3, T4, T5]]: ...
@overload
def gather(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    a6: Awaitable[T6],
    /,
) -> WFuture[tuple[T1, T2, T3, T4, T5, T6]]: ...
@overload
def gather(*awaitables: Awaitable[T]) -> WFuture[tuple[T, ...]]: ...
def gather(*awaitables: Awaitable[Any]) -> WFuture[tuple[Any, ...]]:
    """Wait for all; a tuple of the results in argument order. The first failure in log order
    is raised."""
    replay = current_replay("gather")
    futures = [_as_future(replay, aw) for aw in awaitables]
    out: WFuture[tuple[Any, ...]] = WFuture("gather")
    results: list[Any] = [None] * len(futures)
    left = [len(futures)]
    if not futures:
        out.set_result(())

    def settle(index: int, fut: WFuture[Any]) -> None:
        if out.done():
            return
        exc = fut.exception()
        if exc is not None:
            out.set_exception(exc, fut.order)
            return
        results[index] = fut.result()
        left[0] -= 1
        if left[0] == 0:
            out.set_result(tuple(results), fut.order)

    # The already-settled ones in log order first, as ``race`` and ``any`` take them: the
    # first failure raised is the first in the log, whatever the argument order.
    for _, i in sorted((f.order, i) for i, f in enumerate(futures) if f.done()):
        settle(i, futures[i])
    for i, fut in enumerate(futures):
        if not fut.done():
            fut.add_done_callback(functools.partial(settle, i))
    return out


@overload
def race(a1: Awaitable[T1], /) -> WFuture[tuple[int, T1]]: ...
@overload
def race(a1: Awaitable[T1], a2: Awaitable[T2], /) -> WFuture[tuple[int, T1 | T2]]: ...
@overload
def race(
    a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], /
) -> WFuture[tuple[int, T1 | T2 | T3]]: ...
@overload
def race(
    a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], a4: Awaitable[T4], /
) -> WFuture[tuple[int, T1 | T2 | T3 | T4]]: ...
@overload
def race(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    /,
) -> WFuture[tuple[int, T1 | T2 | T3 | T4 | T5]]: ...
@overload
def race(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    a6: Awaitable[T6],
    /,
) -> WFuture[tuple[int, T1 | T2 | T3 | T4 | T5 | T6]]: ...
@overload
def race(*awaitables: Awaitable[T]) -> WFuture[tuple[int, T]]: ...
def race(*awaitables: Awaitable[Any]) -> WFuture[tuple[int, Any]]:
    """``(index, value)`` of the first to settle in log order (a failure is raised)."""
    replay = current_replay("race")
    futures = [_as_future(replay, aw) for aw in awaitables]
    if not futures:
        raise ValueError("wayline.race needs at least one awaitable")
    out: WFuture[tuple[int, Any]] = WFuture("race")
    settled = sorted((f.order, i) for i, f in enumerate(futures) if f.done())
    if settled:
        _, i = settled[0]
        _settle_race(out, i, futures[i])
        return out
    for i, fut in enumerate(futures):
        fut.add_done_callback(functools.partial(_settle_race, out, i))
    return out


def _settle_race(out: WFuture[tuple[int, Any]], index: int, fut: WFuture[Any]) -> None:
    if out.done():
        return
    exc = fut.exception()
    if exc is not None:
        out.set_exception(exc, fut.order)
    else:
        out.set_result((index, fut.result()), fut.order)
