"""The question an idle worker's rescans share on a queue stream (``levels.StreamProbe``) must
never leave a stored message unfound: not one another process stores while the question is on
its way (this process hearing none of its publishes), not one stored on a topic whose record
began after the question was sent, and a question that fails is never taken for "nothing
stored" (docs/nats.md, "Partitions"). Run against the real server, on one and three
partitions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core import ordering
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import queue as nats_queue
from wayline.worlds.nats.levels import StreamProbe

_KINDS = {
    "level": ordering.Ordering(priority=4).fields(),
    "lane": ordering.Ordering(priority=2, fairness_key="tenant-probe-race").fields(),
}
"""A message on a priority level's subject, and one on a fair lane's (asked by a full scan
only every ``LANE_SCAN_EVERY``-th time)."""


async def _received(world: Any, topic: str) -> list[str]:
    """The names of what the topic's receives find, acked; bounded (each waits 0.1 s)."""
    names: list[str] = []
    for _ in range(100):
        got = await world.receive(topic, wait_seconds=0.1)
        names += [str((d.payload or {})["name"]) for d in got]
        for delivery in got:
            assert await world.ack(delivery) is True
        if names:
            break
    return names


@pytest.mark.parametrize("kind", sorted(_KINDS))
@pytest.mark.parametrize("when", ["before", "during", "after"])
@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_message_another_process_stores_around_the_shared_question_is_found(
    open_nats_world: OpenWorlds,
    monkeypatch: pytest.MonkeyPatch,
    partitions: int,
    when: str,
    kind: str,
) -> None:
    """Another process (a second world on the same prefix) stores a message on an idle topic
    just before this worker's shared question is sent, while it is on its way, or just after
    the server answered it; this process hears none of the topic's publishes. The message is
    found by a later receive, whichever of the three."""
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 0.2)
    worker = await open_nats_world(partitions=partitions)
    other = await open_nats_world(partitions=partitions)
    topic, idle = f"probe-race-{when}-{kind}", f"probe-race-idle-{when}-{kind}"
    for name in (topic, idle):  # every partition's queue records both topics
        assert await worker.receive(name, wait_seconds=0.1) == []
    armed = asyncio.Event()
    stored = asyncio.Event()

    async def store() -> None:
        await other.enqueue(topic, {"name": "raced", **_KINDS[kind]})
        stored.set()

    for queue in worker._queues:
        await queue._levels[topic].sub.unsubscribe()  # no publish of the topic is heard here
        ask = queue._probe._ask

        def racing(ask: Callable[[], Awaitable[bool]] = ask) -> Awaitable[bool]:
            async def asked() -> bool:
                if not armed.is_set() or stored.is_set():
                    return await ask()
                armed.clear()
                if when == "before":
                    await store()
                    return await ask()
                if when == "during":
                    empty, _ = await asyncio.gather(ask(), store())
                    return empty
                empty = await ask()
                await store()
                return empty

            return asked()

        queue._probe._ask = racing
    armed.set()
    # The idle topic's receives ask the shared question, which stores the message around it.
    for _ in range(100):
        assert await worker.receive(idle, wait_seconds=0.1) == []
        if stored.is_set():
            break
    assert stored.is_set()
    assert await _received(worker, topic) == ["raced"]


@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_topic_recorded_after_the_question_was_sent_asks_its_own(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """A topic the worker begins to serve while the shared question is on its way (a route
    added as the question waits for its answer) does not take that question's answer, which
    did not ask about it: a message stored on it before it was recorded is found."""
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 0.2)
    worker = await open_nats_world(partitions=partitions)
    other = await open_nats_world(partitions=partitions)
    idle, late = "probe-late-idle", "probe-late-topic"
    assert await worker.receive(idle, wait_seconds=0.1) == []
    release = asyncio.Event()
    held = asyncio.Event()
    for queue in worker._queues:
        ask = queue._probe._ask

        def holding(ask: Callable[[], Awaitable[bool]] = ask) -> Awaitable[bool]:
            async def asked() -> bool:
                if not held.is_set():  # the first question waits until the new topic asks
                    held.set()
                    empty = await ask()
                    await release.wait()
                    return empty
                return await ask()

            return asked()

        queue._probe._ask = holding
    await other.enqueue(late, {"name": "late", **_KINDS["lane"]})
    idle_loop = asyncio.create_task(worker.receive(idle, wait_seconds=0.5))
    await asyncio.wait_for(held.wait(), 10)
    try:
        names = await _received(worker, late)
    finally:
        release.set()
        assert await idle_loop == []
    assert names == ["late"]


async def test_a_question_that_fails_is_not_taken_for_nothing_stored() -> None:
    """A shared question that times out or fails raises to every rescan waiting on it and
    leaves no answer behind: the next rescan asks again, and "nothing stored" is only ever
    the answer of a question the server answered."""
    answers: list[bool | Exception] = [WorldUnavailableError("timed out"), True]

    async def ask() -> bool:
        await asyncio.sleep(0)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    probe = StreamProbe(ask)
    first = asyncio.gather(probe.since(0.0), probe.since(0.0), return_exceptions=True)
    assert [type(e) for e in await first] == [WorldUnavailableError, WorldUnavailableError]
    assert probe.asked_at is None and probe.empty is False
    at, empty = await probe.since(0.0)
    assert empty is True and probe.asked_at == at and probe.asks == 2
