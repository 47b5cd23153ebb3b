"""A step body runs its first step in its caller's turn and gets a task only when it suspends
(``_engine.eager``), under the fence (``fencing.run_body``) and in an inline batch
(``inflight``). The fence's duties must hold on both paths: a body that suspended is still
cut off by a trip at its ``await``, a tripped fence starts no body, the body's context
variables stay its own, and the fence counts a body as executing while it is suspended."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable

import pytest

from wayline._core.events import Event, EventType
from wayline._engine import eager, fencing
from wayline._engine.deferred import InlineBatch
from wayline._engine.inflight import InFlight

_mine: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test_mine", default="caller")


def _counting_tasks(loop: asyncio.AbstractEventLoop) -> list[str]:
    made: list[str] = []
    factory = loop.get_task_factory()

    def counted(loop: asyncio.AbstractEventLoop, coro: object, **kw: object) -> asyncio.Task:  # type: ignore[type-arg]
        made.append(repr(coro))
        if factory is not None:
            return factory(loop, coro, **kw)  # type: ignore[arg-type]
        return asyncio.Task(coro, loop=loop, **kw)  # type: ignore[arg-type]

    loop.set_task_factory(counted)  # type: ignore[arg-type]
    return made


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


async def test_a_body_that_never_suspends_runs_under_the_fence_without_a_task() -> None:
    loop = asyncio.get_running_loop()
    fence = fencing.Fence(bound=60, handoff=30)
    fencing.hold(fence)

    async def body() -> int:
        assert fence.steps == ["quick"]  # named while it runs, as the shutdown log needs
        return 7

    made = _counting_tasks(loop)
    try:
        assert await fencing.run_body(body, None, step="quick") == 7
    finally:
        loop.set_task_factory(None)
    assert made == []
    assert fence.steps == [] and not fence.bodies


async def test_a_body_that_suspended_is_cut_off_by_a_trip_at_its_await() -> None:
    """The fence's cancel reaches a body once it suspended, as when it ran in a task from
    the start: the attempt is recorded as fenced and the body's ``finally`` ran."""
    fence = fencing.Fence(bound=60, handoff=30)
    fencing.hold(fence)
    seen: list[str] = []
    running = asyncio.ensure_future(fencing.run_body(_sleeper(seen), None, step="slow"))
    await asyncio.sleep(0)
    assert seen == ["start"] and fence.executing()  # suspended: the fence holds its task
    fence.trip("the lease was lost")
    with pytest.raises(fencing.FencedError, match="cut off: the lease was lost"):
        await asyncio.wait_for(running, 5)
    assert seen == ["start", "stopped"]
    assert not fence.executing() and fence.steps == []


async def test_a_tripped_fence_starts_no_body() -> None:
    fence = fencing.Fence(bound=60, handoff=30)
    fencing.hold(fence)
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
    fencing.hold(fencing.Fence(bound=60, handoff=30))

    async def quick() -> str:
        _mine.set("quick")
        return _mine.get()

    async def slow() -> str:
        _mine.set("slow")
        await asyncio.sleep(0)
        return _mine.get()

    assert await fencing.run_body(quick, None, step="q") == "quick"
    assert await fencing.run_body(slow, None, step="s") == "slow"
    assert _mine.get() == "caller"


async def test_an_error_in_a_bodys_first_step_is_the_attempts_error() -> None:
    fencing.hold(fencing.Fence(bound=60, handoff=30))

    async def broken() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        await fencing.run_body(broken, None, step="broken")
    with pytest.raises(ValueError, match="bad input"):
        eager.start(broken())


async def test_an_inline_batch_of_bodies_that_never_suspend_makes_no_task() -> None:
    """Two inline bodies that settle in their first step: their events come back in log
    order, with no task made, and a body that raised in its first step raises from
    ``next`` as a task's error would."""
    loop = asyncio.get_running_loop()

    def event(seq: int) -> Event:
        return Event("r", seq, EventType.STEP_COMPLETED, f"s{seq}", {}, 0.0)

    async def body(seq: int) -> list[Event]:
        return [event(seq)]

    async def broken() -> list[Event]:
        raise ValueError("bad body")

    made = _counting_tasks(loop)
    try:
        inflight = InFlight()
        events = await inflight.start([body(5), body(3)], InlineBatch(2, False))
        assert [e.seq for e in events] == [3, 5]
        assert made == [] and not inflight.pending
        with pytest.raises(ValueError, match="bad body"):
            await inflight.start([broken()], InlineBatch(1, False))
    finally:
        loop.set_task_factory(None)


async def test_a_cancel_of_the_caller_reaches_a_body_that_suspended() -> None:
    """A forced close cancels the handler while the body runs on in its task: the body
    stops at its ``await`` and the handler sees its own cancel, not a fenced attempt."""
    fencing.hold(fencing.Fence(bound=60, handoff=30))
    seen: list[str] = []
    caller = asyncio.ensure_future(fencing.run_body(_sleeper(seen), None, step="closing"))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, 5)
    assert seen == ["start", "stopped"]
