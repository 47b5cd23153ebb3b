"""How many messages a run sends to NATS, counted on the client side (not timed): a
regression that adds a round trip to every run or every step fails here.

Counted, as bench/steps.py counts them: ``request`` calls and ``publish`` calls (nats-py's,
or the world's own ``wire.publish``, each counted once) not made inside a request that name a
reply subject (appends and direct gets) are round trips; a ``publish`` without one (an ack)
is a one-way send. Pull requests are counted apart and not
bounded: how many a worker sends depends on how long its idle pulls wait, which is timing."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from wayline._core.ids import new_run_id
from wayline.errors import ResultTimeoutError
from wayline.world.terminal_hints import TerminalHints

STEPS = 10
MAX_ROUND_TRIPS = 2 + 1 + STEPS + 1 + 3
"""Every round trip of one run but its pull: the start (run created, the keyed publish of its
message), the worker's one read of the run and its events, one append per step and the run's
end, and the runs index's entry at each of the run's three statuses (pending, running,
completed). Before the round-trip work (51dbb12): 23 sends; with the run and its events read
apart (a10ad11): 16; with an ack that waited for its reply (829bdac): 15; with the runs
index: 18."""
MAX_READS = 1
"""The worker's read of the run and its log, together (``World.read_run``)."""
MAX_ONE_WAY = 1 + 2
"""The delivery's ack, and the runs index's purges of the run's entry under its old status
(pending, then running), which wait for no reply."""


@wayline.step(name="rt.noop")
async def noop(i: int) -> int:
    return i


@wayline.workflow(name="rt.chain")
async def chain(n: int) -> int:
    for i in range(n):
        await noop(i)
    return n


@contextlib.contextmanager
def counting() -> Iterator[Counter[str]]:
    from nats.aio.client import Client

    from wayline.worlds.nats import wire

    counts: Counter[str] = Counter()
    inside = contextvars.ContextVar("inside_request", default=False)
    request, publish, wire_publish = Client.request, Client.publish, wire.publish

    async def counted_request(self: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
        counts["request"] += 1
        token = inside.set(True)
        try:
            return await request(self, subject, *args, **kwargs)
        finally:
            inside.reset(token)

    def count(subject: str, reply: str) -> None:
        if inside.get():
            return
        if ".CONSUMER.MSG.NEXT." in subject:
            counts["pull"] += 1
        else:
            counts["publish+reply" if reply else "publish"] += 1
        if ".DIRECT.GET." in subject:
            counts["read"] += 1
        if subject.startswith("$JS.ACK."):
            counts["ack"] += 1

    async def counted_publish(self: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
        count(subject, kwargs.get("reply", args[1] if len(args) > 1 else ""))
        return await publish(self, subject, *args, **kwargs)

    async def counted_wire(nc: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
        """The world's publishes, written to the socket at once (not again if handed on)."""
        count(subject, kwargs.get("reply", ""))
        token = inside.set(True)
        try:
            return await wire_publish(nc, subject, *args, **kwargs)
        finally:
            inside.reset(token)

    patched: dict[str, Callable[..., Awaitable[Any]]] = {
        "request": counted_request,
        "publish": counted_publish,
    }
    for name, fn in patched.items():
        setattr(Client, name, fn)
    wire.publish = counted_wire  # type: ignore[assignment]
    try:
        yield counts
    finally:
        Client.request, Client.publish = request, publish  # type: ignore[method-assign]
        wire.publish = wire_publish  # type: ignore[assignment]


def _sent(counts: Counter[str]) -> int:
    return counts["request"] + counts["publish+reply"] + counts["publish"]  # idle pulls go on


async def _acked(counts: Counter[str]) -> None:
    """Wait until the run's delivery is acked (its ack is the last send of the run)."""
    for _ in range(600):
        if counts["ack"]:
            return
        await asyncio.sleep(0.05)


async def _quiet(counts: Counter[str]) -> None:
    """Wait until runs that ended have sent everything: nothing sent for half a second (their
    acks follow their ends by a few loop turns, later on a loaded machine)."""
    for _ in range(60):
        before = _sent(counts)
        await asyncio.sleep(0.5)
        if _sent(counts) == before:
            return


async def test_a_ten_step_run_sends_a_bounded_number_of_messages(
    open_nats_world: OpenWorlds,
) -> None:
    """The client and the worker hold worlds of their own (as the operator's pod and a
    worker's): the worker knows the run only from its start message."""
    world = await open_nats_world()
    client = wayline.Client(await open_nats_world())
    async with wayline.Worker(world, [chain]):
        with counting() as warming:  # warm: consumers created, routes known
            for _ in range(2):
                assert await (await client.start(chain, STEPS)).result(timeout=60) == STEPS
            await _quiet(warming)  # the last warm-up delivery's ack is not counted below
        with counting() as counts:
            run_id = new_run_id()
            ended = TerminalHints.of(world).watch(run_id)  # before the start: no end unheard
            handle = await client.start_with(wayline.StartOptions(run_id=run_id), chain, STEPS)
            await asyncio.wait_for(ended, 60)
            await _acked(counts)
            trips = counts["request"] + counts["publish+reply"]
            one_way = counts["publish"]
            reads = counts["read"]
        assert await handle.result(timeout=60) == STEPS
    assert reads <= MAX_READS, counts
    assert trips <= MAX_ROUND_TRIPS, counts
    assert one_way <= MAX_ONE_WAY, counts


async def test_a_run_started_beside_its_worker_is_driven_without_a_read(
    open_nats_world: OpenWorlds,
) -> None:
    """Client and worker on one world (the embedded shape): the start message carries where
    the world's view of the run ends after its own append (``logMark``), so the worker drives
    the run from that view: no read of the run, one round trip fewer than across processes."""
    world = await open_nats_world()
    client = wayline.Client(world)
    async with wayline.Worker(world, [chain]):
        with counting() as warming:
            for _ in range(2):
                assert await (await client.start(chain, STEPS)).result(timeout=60) == STEPS
            await _quiet(warming)
        with counting() as counts:
            run_id = new_run_id()
            ended = TerminalHints.of(world).watch(run_id)
            handle = await client.start_with(wayline.StartOptions(run_id=run_id), chain, STEPS)
            await asyncio.wait_for(ended, 60)
            await _acked(counts)
            trips = counts["request"] + counts["publish+reply"]
            reads = counts["read"]
        assert await handle.result(timeout=60) == STEPS
    assert reads == 0, counts
    assert trips <= MAX_ROUND_TRIPS - MAX_READS, counts


async def test_a_result_asked_after_the_run_ended_reads_at_once(
    open_nats_world: OpenWorlds, monkeypatch: Any
) -> None:
    """A fresh handle skips its first read only while no end has been heard: once the world
    heard the run's terminal hint, ``result()`` reads before it waits (no pause for a hint
    that came already). The client's world is not the worker's: it hears the end as a hint
    and holds no view of it."""
    import types

    from wayline import client as client_module

    world = await open_nats_world()
    client = wayline.Client(await open_nats_world())
    steps: list[str] = []
    real_get_run, real_wait = client.world.get_run, asyncio.wait

    async def get_run(run_id: str) -> Any:
        steps.append("read")
        return await real_get_run(run_id)

    async def wait(*args: Any, **kwargs: Any) -> Any:
        steps.append("wait")
        return await real_wait(*args, **kwargs)

    async with wayline.Worker(world, [chain]):
        run_id = new_run_id()
        ended = client.ends.watch(run_id)
        handle = await client.start_with(wayline.StartOptions(run_id=run_id), chain, 2)
        await asyncio.wait_for(ended, 60)
        assert client.ends.heard_ended(run_id)
        assert await client.world.known_end(run_id) is None
        monkeypatch.setattr(client.world, "get_run", get_run)
        monkeypatch.setattr(
            client_module, "asyncio", types.SimpleNamespace(wait=wait, sleep=asyncio.sleep)
        )
        assert await handle.result(timeout=60) == 2
    assert steps == ["read"], steps


async def test_a_result_of_a_run_this_process_ended_reads_nothing(
    open_nats_world: OpenWorlds,
) -> None:
    """Client and worker on one world (the embedded shape): the world appended the run's end
    and holds its final view, so ``result()`` returns it without reading the run, also for a
    failed run and for a handle found by id."""
    world = await open_nats_world()
    client = wayline.Client(world)
    async with wayline.Worker(world, [chain, broken]):
        handle = await client.start(chain, 3)
        failed = await client.start(broken)
        for run_id in (handle.run_id, failed.run_id):
            ended = client.ends.watch(run_id)
            if not client.ends.heard_ended(run_id):
                await asyncio.wait_for(ended, 60)
            client.ends.unwatch(run_id, ended)
        with counting() as counts:
            assert await handle.result(timeout=60) == 3
            assert await client.handle(handle.run_id).result(timeout=60) == 3
            with pytest.raises(wayline.RunFailedError, match="broken on purpose"):
                await failed.result(timeout=60)
    # a read is a direct get; the worker's acks and pulls may fall in the window and are not
    # the client's
    assert counts["read"] == 0, counts
    known = await world.known_end(handle.run_id)
    assert known is not None and known.output == 3


@wayline.workflow(name="rt.broken")
async def broken() -> None:
    raise wayline.FatalError("broken on purpose")


@wayline.workflow(name="rt.echo")
async def echo(x: int) -> int:
    return x


async def test_an_end_known_here_is_forgotten_when_its_run_id_is_used_again(
    open_nats_world: OpenWorlds,
) -> None:
    """A run deleted by another process and started again under its id: the world that held
    its old end hears the new run's first append and drops that view, so ``result()`` reads
    the new run (pending) instead of returning the old output."""
    a, b = await open_nats_world(), await open_nats_world()
    ca, cb = wayline.Client(a), wayline.Client(b)
    run_id = new_run_id()
    async with wayline.Worker(a, [echo]):
        handle = await ca.start_with(wayline.StartOptions(run_id=run_id), echo, 1)
        assert await handle.result(timeout=30) == 1
    assert await a.known_end(run_id) is not None
    assert await b.delete_runs(older_than=0) >= 1
    # the same id, a new run, no worker: pending
    await cb.start_with(wayline.StartOptions(run_id=run_id), echo, 2)
    for _ in range(100):
        if await a.known_end(run_id) is None:
            break
        await asyncio.sleep(0.05)
    assert await a.known_end(run_id) is None
    with pytest.raises(ResultTimeoutError, match="pending"):
        await ca.handle(run_id).result(timeout=1)


async def test_a_fresh_handle_whose_end_may_have_gone_unheard_reads_at_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handle fresh from ``start`` waits for its run's hint before it reads only while the
    world would know of the end: it remembers its last 1,024 ends, so once as many other ends
    were heard since the start, or once a hint may have been lost (a reconnect), it reads at
    once rather than wait out the safety poll (1 s) for a hint that came already."""
    from tests.runtime.harness import record_result_waits

    world, client_world = await open_nats_world(), await open_nats_world()
    client = wayline.Client(client_world)
    async with wayline.Worker(world, [chain]):
        for how in ("forgotten", "lost"):
            run_id = new_run_id()
            ended = client.ends.watch(run_id)
            handle = await client.start_with(wayline.StartOptions(run_id=run_id), chain, 2)
            await asyncio.wait_for(ended, 60)
            client.ends.unwatch(run_id, ended)
            if how == "forgotten":
                for i in range(1024):  # other runs' ends: this one's is forgotten
                    client_world._wake_terminal(f"other-{i}")
                assert not client.ends.heard_ended(run_id)
            else:  # as if the hint had not come: a reconnect says it may have been lost
                client.ends._heard.pop(run_id)
                client_world._hints_may_be_lost()
            waits = record_result_waits(monkeypatch)
            assert await handle.result(timeout=60) == 2
            assert waits == [], (how, waits)
