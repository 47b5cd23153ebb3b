"""A step body runs in a task of its own that takes its first step at once, in its caller's
turn (``_engine.eager``), under the fence (``fencing.run_body``) and in an inline batch
(``inflight``). A body that never suspends is done before its caller goes on, with no task
made by the loop and no turn of it; and the body's own task is current from its first line,
so a cancel, a timeout or a task group it starts before its first ``await`` reaches the
body, never its caller (the first eager bodies, 9d3c68e, ran that step in the caller's task).
The fence's duties hold as before: a body that suspended is cut off by a trip at its
``await``, a tripped fence starts no body, the body's context variables stay its own, and the
fence counts a body as executing while it is suspended."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.runtime.test_step_body_task_scopes import grouped, guarded
from wayline._core.events import Event, EventType
from wayline._engine import eager, fencing
from wayline._engine.deferred import InlineBatch
from wayline._engine.inflight import InFlight

_mine: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test_mine", default="caller")


@contextmanager
def _counting_tasks() -> Iterator[list[str]]:
    """The tasks the running loop makes (``create_task``), by the repr of their coroutine."""
    loop = asyncio.get_running_loop()
    made: list[str] = []
    factory = loop.get_task_factory()

    def counted(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(repr(coro))
        if factory is not None:
            return factory(loop, coro, **kw)  # type: ignore[call-arg]
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(counted)
    try:
        yield made
    finally:
        loop.set_task_factory(factory)


def _sleeper(seen: list[str]) -> Callable[[], Awaitable[int]]:
    """A body that suspends at once and says when it started and when it stopped."""

    async def body() -> int:
        seen.append("start")
        try:
            await asyncio.sleep(3600)
        finally:
            seen.append("stopped")
        return 1

    return body


def _fenced() -> fencing.Fence:
    fence = fencing.Fence(bound=60, handoff=30)
    fencing.hold(fence)
    return fence


async def test_a_body_that_never_suspends_runs_under_the_fence_without_a_loop_task() -> None:
    fence = _fenced()
    me = asyncio.current_task()
    seen: list[object] = []

    async def body() -> int:
        assert fence.steps == ["quick"]  # named while it runs, as the shutdown log needs
        seen.append(asyncio.current_task())
        return 7

    with _counting_tasks() as made:
        assert await fencing.run_body(body, None, step="quick") == 7
    assert made == []
    assert isinstance(seen[0], eager.EagerTask) and seen[0] is not me
    assert asyncio.current_task() is me
    assert fence.steps == [] and not fence.bodies


async def test_a_bodys_task_is_current_from_its_first_line_and_stays_the_same() -> None:
    _fenced()
    me = asyncio.current_task()
    seen: list[object] = []

    async def body() -> bool:
        first = asyncio.current_task()
        seen.append(first)
        await asyncio.sleep(0)
        seen.append(asyncio.current_task())
        await asyncio.sleep(0.01)
        return asyncio.current_task() is first

    assert await fencing.run_body(body, None, step="same") is True
    assert seen[0] is seen[1] and seen[0] is not me and seen[0] is not None
    assert asyncio.current_task() is me


async def test_a_body_that_suspended_is_cut_off_by_a_trip_at_its_await() -> None:
    """The fence's cancel reaches a body once it suspended, as when it ran in a task from
    the start: the attempt is recorded as fenced and the body's ``finally`` ran."""
    fence = _fenced()
    seen: list[str] = []
    running = asyncio.ensure_future(fencing.run_body(_sleeper(seen), None, step="slow"))
    await asyncio.sleep(0)
    assert seen == ["start"] and fence.executing()  # suspended: the fence holds its task
    fence.trip("the lease was lost")
    with pytest.raises(fencing.FencedError, match="cut off: the lease was lost"):
        await asyncio.wait_for(running, 5)
    assert seen == ["start", "stopped"]
    assert not fence.executing() and fence.steps == []


async def test_a_body_that_suspends_then_finishes_is_held_by_the_fence_meanwhile() -> None:
    fence = _fenced()
    gate = asyncio.Event()

    async def body() -> str:
        await gate.wait()
        return "done"

    running = asyncio.ensure_future(fencing.run_body(body, None, step="gated"))
    await asyncio.sleep(0)
    assert fence.executing() and len(fence.bodies) == 1
    gate.set()
    assert await asyncio.wait_for(running, 5) == "done"
    assert not fence.bodies and fence.steps == []


async def test_a_tripped_fence_starts_no_body() -> None:
    fence = _fenced()
    fence.trip("the invocation bound")
    ran: list[str] = []

    async def body() -> None:
        ran.append("body")

    with pytest.raises(fencing.FencedError, match="not started"):
        await fencing.run_body(body, None, step="never")
    assert ran == []


async def test_a_body_sets_its_context_variables_in_its_own_context() -> None:
    """As in a task of its own: what the body sets is not seen by its caller, on either
    path, and the part after its first suspension sees what its first step set."""
    _fenced()

    async def quick() -> str:
        _mine.set("quick")
        return _mine.get()

    async def slow() -> str:
        _mine.set("slow")
        await asyncio.sleep(0)
        return _mine.get()

    assert await fencing.run_body(quick, None, step="q") == "quick"
    assert _mine.get() == "caller"
    assert await fencing.run_body(slow, None, step="s") == "slow"
    assert _mine.get() == "caller"


async def test_an_error_in_a_bodys_first_step_is_the_attempts_error() -> None:
    _fenced()
    me = asyncio.current_task()

    async def broken() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await fencing.run_body(broken, None, step="broken")
    task = eager.start(broken())
    assert task.done() and isinstance(task.exception(), ValueError)
    assert asyncio.current_task() is me  # the caller's task is current again


async def test_a_cancel_of_its_own_task_before_its_first_await_reaches_the_body() -> None:
    """``asyncio.current_task().cancel()`` in the first step cancels the body's own task:
    the ``CancelledError`` comes at the body's first ``await``, where it may catch it, and
    the caller is not cancelled (in the caller's task, this cancelled the handler)."""
    _fenced()
    me = asyncio.current_task()
    assert me is not None

    async def body() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            task.uncancel()
            return "caught"
        return "not cancelled"

    assert await asyncio.wait_for(fencing.run_body(body, None, step="self-cancel"), 5) == ("caught")
    assert me.cancelling() == 0


async def test_a_body_that_cancels_itself_and_returns_is_not_its_callers_cancel() -> None:
    """Cancelled in its first step and returning before any ``await``, the body's task ends
    cancelled (as a task does): the attempt fails with the error a body that let a cancel of
    its own escape gets, and the caller runs on."""
    _fenced()
    me = asyncio.current_task()
    assert me is not None

    async def body() -> int:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        return 1

    with pytest.raises(RuntimeError, match="without being cancelled"):
        await fencing.run_body(body, None, step="self-cancel-quick")
    assert me.cancelling() == 0


async def test_a_cancel_at_its_first_await_cancels_what_the_body_awaits() -> None:
    """The caller cancels the body's task right after it was made, while it waits at its
    first ``await`` on a task of its own: the cancel reaches that inner task too, as a task's
    cancel reaches what it awaits (a throw into the body before its task's first turn
    left the inner task running)."""
    inner_seen: list[str] = []

    async def inner() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            inner_seen.append("inner stopped")

    held: list[asyncio.Task[None]] = []

    async def body() -> None:
        child = asyncio.ensure_future(inner())
        held.append(child)
        await child

    task = eager.start(body())  # cancelled before a turn of the loop: inner has not begun
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert held[0].cancelled() and inner_seen == []
    task = eager.start(body())  # cancelled once inner began: its ``finally`` runs
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert held[1].cancelled() and inner_seen == ["inner stopped"]


async def test_a_cancel_after_its_first_await_reaches_the_body_at_its_next() -> None:
    seen: list[str] = []

    async def body() -> None:
        await asyncio.sleep(0)
        seen.append("past the first await")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled at the second")
            raise

    task = eager.start(body())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert seen == ["past the first await"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert seen == ["past the first await", "cancelled at the second"]


async def test_a_timeout_and_a_task_group_entered_before_the_first_await_are_the_bodys() -> None:
    """The bodies of ``tests/runtime/test_step_body_task_scopes.py``, run under a fence here:
    the timeout and the failed child cancel the body, and the caller's task has no cancel
    asked of it."""
    _fenced()
    me = asyncio.current_task()
    assert me is not None
    assert await asyncio.wait_for(fencing.run_body(guarded.fn, None, step="t"), 5) == "fallback"
    assert await asyncio.wait_for(fencing.run_body(grouped.fn, None, step="g"), 5) == "handled"
    assert me.cancelling() == 0


async def test_an_inline_batch_of_bodies_that_never_suspend_makes_no_loop_task() -> None:
    """Two inline bodies that settle in their first step: their events come back in log
    order, with no task made by the loop, and a body that raised in its first step raises
    from ``next`` as a task's error would."""

    def event(seq: int) -> Event:
        return Event("r", seq, EventType.STEP_COMPLETED, f"s{seq}", {}, 0.0)

    async def body(seq: int) -> list[Event]:
        return [event(seq)]

    async def broken() -> list[Event]:
        raise ValueError("bad body")

    with _counting_tasks() as made:
        inflight = InFlight()
        events = await inflight.start([body(5), body(3)], InlineBatch(2, False))
        assert [e.seq for e in events] == [3, 5]
        assert made == [] and not inflight.pending
        with pytest.raises(ValueError, match="bad body"):
            await inflight.start([broken()], InlineBatch(1, False))


async def test_a_cancel_of_the_caller_reaches_a_body_that_suspended() -> None:
    """A forced close cancels the handler while the body runs on in its task: the body
    stops at its ``await`` and the handler sees its own cancel, not a fenced attempt."""
    _fenced()
    seen: list[str] = []
    caller = asyncio.ensure_future(fencing.run_body(_sleeper(seen), None, step="closing"))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, 5)
    assert seen == ["start", "stopped"]


async def test_a_forced_close_right_after_a_body_suspended_cancels_what_it_awaits() -> None:
    """The handler is cancelled in the very turn after an inline body first suspended, on a
    task of its own: the close cancels the body's task, and the cancel reaches what the body
    awaits, as any task's cancel does. (A body whose first step ran in the handler's turn and
    whose task was made only then got the cancel thrown in at its ``await`` before that task's
    first turn, and the task it awaited ran on.)"""
    held: list[asyncio.Task[None]] = []

    async def body() -> list[Event]:
        child = asyncio.ensure_future(asyncio.sleep(3600))
        held.append(child)
        await child
        return []

    inflight = InFlight()
    starter = asyncio.ensure_future(inflight.start([body()], InlineBatch(1, False)))
    await asyncio.sleep(0)  # the starter ran: the body suspended on its child
    starter.cancel()
    await inflight.settle(cancel=True)
    await asyncio.gather(starter, return_exceptions=True)
    assert [child.cancelled() for child in held] == [True]


async def test_a_body_started_while_its_caller_handles_an_error_does_not_see_that_error() -> None:
    """A body's first step runs in its caller's frames; if the caller is inside an
    ``except`` block then, the body must still start as a task of its own does, handling no
    error: ``sys.exc_info()`` is empty, a bare ``raise`` has nothing to raise, and an error it
    raises and catches itself is not chained to the caller's (a body that logs it would log
    the handler's error as its own). It still runs in its own task under the fence."""
    fence = _fenced()
    me = asyncio.current_task()

    async def looks() -> object:
        assert asyncio.current_task() is not me
        return sys.exc_info()[1]

    async def reraises() -> None:
        raise  # what a body with nothing to re-raise gets is the point

    async def chains() -> object:
        try:
            raise ValueError("the body's own")
        except ValueError as err:
            return err.__context__

    try:
        raise KeyError("the caller's own")
    except KeyError:
        seen = await fencing.run_body(looks, None, step="eager_exc_info_looks")
        with pytest.raises(RuntimeError, match="No active exception"):
            await fencing.run_body(reraises, None, step="eager_exc_info_bare_raise")
        context = await fencing.run_body(chains, None, step="eager_exc_info_chains")
        assert isinstance(sys.exc_info()[1], KeyError)  # the caller's own is still its own
    assert seen is None
    assert context is None
    assert asyncio.current_task() is me and fence.steps == [] and not fence.bodies


async def test_an_inline_batch_started_while_its_caller_handles_an_error_runs_clean() -> None:
    """The same for an inline batch: each body starts handling no error, and the batch's
    events still come back from ``next`` (every body has taken its first step by then)."""

    def event(seq: int) -> Event:
        return Event("r", seq, EventType.STEP_COMPLETED, f"s{seq}", {}, 0.0)

    seen: list[object] = []

    async def body(seq: int) -> list[Event]:
        seen.append(sys.exc_info()[1])
        return [event(seq)]

    inflight = InFlight()
    try:
        raise KeyError("the handler's own")
    except KeyError:
        events = await inflight.start([body(2), body(1)], InlineBatch(2, False))
    assert [e.seq for e in events] == [1, 2]
    assert seen == [None, None] and not inflight.pending


async def test_a_body_that_exits_in_its_first_step_reaches_its_maker_and_nothing_else() -> None:
    """``SystemExit`` (or ``KeyboardInterrupt``) raised in a body's first step passes on to
    whoever made the task, as a task's step passes it on to the loop: the exit goes on from
    there, the bodies of the batch not started yet are closed (never reported as never
    awaited), and the exited task is not reported again at collection as an error nobody
    retrieved (its maker had it)."""
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
    ran: list[str] = []

    async def exits() -> list[Event]:
        raise SystemExit(3)

    async def after() -> list[Event]:
        ran.append("after")
        return []

    try:
        inflight = InFlight()
        later = after()
        with pytest.raises(SystemExit):
            await inflight.start([exits(), later], InlineBatch(2, False))
        with pytest.raises(SystemExit):
            eager.start(exits())
        gc.collect()
        assert ran == [] and later.cr_frame is None
        assert reported == []
    finally:
        loop.set_exception_handler(handler)
