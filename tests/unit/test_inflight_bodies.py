"""Inline bodies a delivery runs (``_engine.inflight``): the handler goes on as soon as one
settles, and a forced close cancels those still running."""

from __future__ import annotations

import asyncio
import gc
import warnings

from wayline._core.events import Event
from wayline._engine.deferred import InlineBatch
from wayline._engine.inflight import InFlight


async def test_a_body_cancelled_by_a_forced_close_stops_at_its_await() -> None:
    """A body takes its first step when it is started (``eager``). A forced close
    (``settle(cancel=True)``) cancels its task while it waits at its first ``await``: the
    cancel reaches the body there (its ``finally`` runs), and no coroutine is left
    un-awaited for the garbage collector to warn about."""
    ran: list[str] = []

    async def body() -> list[Event]:
        ran.append("start")
        try:
            await asyncio.sleep(3600)
        finally:
            ran.append("stopped")
        return []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inflight = InFlight()
        starter = asyncio.ensure_future(inflight.start([body()], InlineBatch(1, False)))
        await asyncio.sleep(0)  # the starter ran the body's first step, and waits
        assert ran == ["start"] and inflight.pending
        starter.cancel()  # the handler is cancelled (a forced close) ...
        await inflight.settle(cancel=True)  # ... and cancels the body's task
        assert (await asyncio.gather(starter, return_exceptions=True))[0].__class__ is (
            asyncio.CancelledError
        )
        gc.collect()
    assert ran == ["start", "stopped"]
    assert [str(w.message) for w in caught] == []


async def test_a_settled_body_wakes_next_and_a_cancelled_next_loses_no_body() -> None:
    gate = asyncio.Event()

    async def body() -> list[Event]:
        await gate.wait()
        return []

    inflight = InFlight()
    first = asyncio.ensure_future(inflight.start([body()], InlineBatch(1, False)))
    await asyncio.sleep(0)
    first.cancel()  # the handler gives up waiting: the body stays in flight
    await asyncio.gather(first, return_exceptions=True)
    assert inflight.pending
    gate.set()
    assert await asyncio.wait_for(inflight.next(), 5) == []
    assert not inflight.pending


async def test_bodies_started_beside_a_settled_one_have_begun_when_start_returns() -> None:
    """A body of an earlier batch settled while the handler was busy elsewhere; the handler
    starts a new batch and ``start`` hands back the settled one's events at once. The new
    bodies must have had their first turn by then: a body registers itself as running here
    (``inflight_owned``) in it, and a handler that drove on before saw its own step as
    started with no body running, and re-ran it as owned recovery: one body twice."""
    begun: list[str] = []

    async def settled() -> list[Event]:
        return []

    async def new_body() -> list[Event]:
        begun.append("new")  # what run_inline does first: inflight_owned.add(cid)
        await asyncio.sleep(3600)
        return []

    inflight = InFlight()
    leftover = asyncio.ensure_future(settled())  # an earlier batch's body ...
    inflight.tasks[leftover] = InlineBatch(1, False)
    await asyncio.sleep(0)
    assert leftover.done()  # ... settled while the handler wrote something else
    assert await inflight.start([new_body()], InlineBatch(1, False)) == []
    assert begun == ["new"]
    await inflight.settle(cancel=True)


def test_the_last_body_does_not_defer_while_a_siblings_outcome_is_being_written() -> None:
    """Two bodies of one batch: the first to finish writes its own completion; the last may
    carry its completion on the run's next write only once that write is done. Deferred
    while it was under way, its provisional completion was fed at the seq the sibling's write
    took, the carrying write found the log moved, and the replay was rebuilt under running
    bodies."""
    from wayline._engine.step_runner import Completed

    batch = InlineBatch(running=2, defer=True)
    assert not batch.finished("s1", Completed(1), eligible=True)  # not the last: writes itself
    batch.writing += 1  # ... and that write is under way
    assert not batch.finished("s2", Completed(2), eligible=True)
    assert batch.deferred is None
    alone = InlineBatch(running=1, defer=True)
    assert alone.finished("s1", Completed(1), eligible=True)  # no sibling: it defers
