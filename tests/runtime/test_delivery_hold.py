"""How the worker ends a held delivery whose hold is over (``Worker._renew_loop``).

These tests run the renew loop alone over deliveries put straight into a worker's ``_held``,
with a world that only renews (its answers are the point: refused, or unanswered), and record
the process exit that ``exit_if_executing`` would make instead of making it. What a real
server answers is covered by ``tests/nats/test_unanswered_renewal.py`` and
``tests/nats/test_leader_crash.py``."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import wayline
from tests.runtime.harness import settings
from wayline._engine.fencing import Fence


class RenewOnlyWorld:
    def __init__(self, visibility: float, renew: Callable[[Any], Awaitable[bool]]) -> None:
        self.visibility_seconds = visibility
        self._renew = renew

    async def renew(self, delivery: Any) -> bool:
        return await self._renew(delivery)


class Held:
    def __init__(self, name: str) -> None:
        self.message_id = name
        self.attempt = 1
        self.topic = "flow"
        self.payload: dict[str, Any] = {}


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When the process would have exited (``os._exit``), instead of exiting."""
    at: list[float] = []
    monkeypatch.setattr(os, "_exit", lambda code: at.append(time.monotonic()))
    return at


def _worker(world: RenewOnlyWorld) -> Any:
    return wayline.Worker(world, [], settings=settings(), recover=False)  # type: ignore[arg-type]


def _hold(worker: Any, name: str, fence: Fence) -> None:
    delivery = Held(name)
    worker._held[id(delivery)] = (delivery, fence)


def _running_sync_body(fence: Fence) -> None:
    fence.threads.add(threading.Event())  # never set: a sync body still in its thread


async def _run_loop(worker: Any, seconds: float) -> None:
    task = asyncio.ensure_future(worker._renew_loop())
    await asyncio.sleep(seconds)
    worker._closed = True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_refused_renewal_ends_a_sync_body_before_the_old_deadline(
    exits: list[float],
) -> None:
    """A refused renewal (on NATS, every one after a lost connection: the restarted server
    may have redelivered the message already) ends the hold at once: a sync body, which no
    cancel reaches, is not let run on until one visibility after the last renewal."""
    refused: list[float] = []

    async def refuse(_: Any) -> bool:
        refused.append(time.monotonic())
        return False

    worker = _worker(RenewOnlyWorld(6.0, refuse))  # renewals every 2 s
    fence = Fence(bound=100.0, handoff=50.0)
    fence.renewed = time.monotonic() - 1.9  # a renewal is due at the loop's first look
    _running_sync_body(fence)
    _hold(worker, "m1", fence)
    old_deadline = fence.renewed + 5.0  # last renewal + 5/6 of the visibility
    await _run_loop(worker, 4.5)
    assert refused and fence.tripped is not None and "refused" in fence.tripped
    assert exits, "the sync body was never ended"
    assert exits[0] < old_deadline - 1.0, (
        f"the sync body ran on {exits[0] - refused[0]:.1f}s beside the redelivery"
    )


async def test_unanswered_renewals_of_others_do_not_delay_a_fenced_exit(
    exits: list[float],
) -> None:
    """Two other deliveries' renewals go unanswered (a consumer electing its leader; each
    call ends after a request timeout, scaled here to 0.5 s of a 3 s visibility): a tripped
    delivery whose sync body still runs is given up, and the process exited, before that
    delivery could be redelivered, not once the loop is done waiting for the others."""

    async def unanswered(_: Any) -> bool:
        await asyncio.sleep(0.5)
        raise wayline.WorldUnavailableError("renewal of message unconfirmed (no responders)")

    world = RenewOnlyWorld(3.0, unanswered)  # renewals every 1 s; deadline at 2.5 s
    worker = _worker(world)
    start = time.monotonic()
    for name, age in (("d1", 0.9), ("d2", 0.4)):  # their renewals come due one after other
        fence = Fence(bound=100.0, handoff=50.0)
        fence.renewed = start - age
        _hold(worker, name, fence)
    tripped = Fence(bound=100.0, handoff=50.0)
    tripped.renewed = start - 2.0
    tripped.trip("not renewed (test)")
    _running_sync_body(tripped)
    _hold(worker, "s", tripped)
    redeliverable = tripped.renewed + world.visibility_seconds
    await _run_loop(worker, 2.5)
    assert exits, "never exited"
    assert exits[0] < redeliverable, (
        f"exited {exits[0] - redeliverable:.2f}s after the delivery could be redelivered"
    )


async def test_a_refused_renewal_cuts_an_async_body_off_without_exiting(
    exits: list[float],
) -> None:
    """A refused renewal (every one after a lost connection, e.g. the server a worker was
    connected to crashed) cancels the delivery's async bodies: a cancel takes effect at the
    body's next await, so the body is given that moment to end, and the process does not
    exit for a body that is already ending (it did: the check ran in the same loop turn as
    the cancel, and ``os._exit(70)`` took down every run the worker held)."""

    async def refuse(_: Any) -> bool:
        return False

    worker = _worker(RenewOnlyWorld(6.0, refuse))
    fence = Fence(bound=100.0, handoff=50.0)
    fence.renewed = time.monotonic() - 1.9  # a renewal is due at the loop's first look
    body = asyncio.ensure_future(asyncio.sleep(60))
    fence.bodies.add(body)
    fence.handler = asyncio.ensure_future(asyncio.sleep(60))  # the delivery's handler
    _hold(worker, "a1", fence)
    deadline = fence.renewed + 5.0  # last renewal + 5/6 of the visibility
    loop = asyncio.ensure_future(worker._renew_loop())
    await asyncio.sleep(1.0)
    assert fence.tripped is not None and "refused" in fence.tripped
    assert body.cancelled(), "the async body was not cut off"
    # the handler may still record what was done before: held (and its appends asked
    # again, ``patience``) until the deadline its last renewal proved
    assert worker._held and not fence.handler.done()
    assert worker._deadline(fence) == deadline
    await asyncio.sleep(max(0.0, deadline - time.monotonic()) + 1.0)
    worker._closed = True
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    assert not worker._held and fence.handler.cancelled(), "not given up at its deadline"
    assert exits == [], "the process exited for an async body that its cancel was ending"


async def test_a_refused_renewal_exits_for_an_async_body_that_ignores_its_cancel(
    exits: list[float],
) -> None:
    """An async body that swallows its cancel and runs on would run beside the redelivery:
    the process still exits for it, at the delivery's deadline."""

    async def refuse(_: Any) -> bool:
        return False

    stop = False

    async def stubborn() -> None:
        while not stop:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                continue

    worker = _worker(RenewOnlyWorld(6.0, refuse))
    fence = Fence(bound=100.0, handoff=50.0)
    fence.renewed = time.monotonic() - 1.9
    body = asyncio.ensure_future(stubborn())
    fence.bodies.add(body)
    _hold(worker, "a2", fence)
    try:
        await _run_loop(worker, 4.0)  # past its deadline, 3.1 s away
        assert exits, "the process did not exit for a body that ignored its cancel"
    finally:
        stop = True
        body.cancel()
        await asyncio.gather(body, return_exceptions=True)


async def test_a_renewal_refused_after_the_fence_tripped_still_ends_the_hold_at_once(
    exits: list[float],
) -> None:
    """A renewal under way when its fence trips (past its bound, say) and then refused: the
    delivery may be redelivered already, so a sync body still running ends with the process
    now, not at the tripped fence's deadline (the refusal was ignored, the body ran on for up
    to 5/6 of a visibility beside the redelivery)."""
    fence = Fence(bound=100.0, handoff=50.0)
    answered: list[float] = []

    async def refuse_late(_: Any) -> bool:
        fence.trip("past its bound (test)")  # the fence trips while the renewal is under way
        await asyncio.sleep(0.3)
        answered.append(time.monotonic())
        return False

    worker = _worker(RenewOnlyWorld(6.0, refuse_late))
    fence.renewed = time.monotonic() - 1.9
    _running_sync_body(fence)
    _hold(worker, "t1", fence)
    old_deadline = fence.renewed + 5.0
    await _run_loop(worker, 2.0)
    assert answered, "the renewal was never answered"
    assert exits and exits[0] < old_deadline - 1.0, "the refusal was ignored"
    assert fence.lost is not None
