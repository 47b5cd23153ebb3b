"""A worker's flow slots are taken by messages in hand, never by a long poll (issues #38, #39):
with one flow slot and prompt wakes off, a run that sleeps briefly between steps is woken by
the receive of its own route as soon as its wake is due, not after the empty polls of the
worker's other flow topics (its other route, the plain topic) have run out."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import wayline
from tests.runtime.harness import Engine, settings, wait_for
from wayline._core.ids import new_run_id
from wayline.world import FLOW_TOPIC, Delivery


@wayline.step(name="flow_slots_tick")
async def flow_slots_tick(i: int) -> int:
    return i


@wayline.workflow(name="flow_slots_sleepy")
async def flow_slots_sleepy(count: int, seconds: float = 0.1) -> int:
    """A step, then a sleep of ``seconds``, ``count`` times."""
    for i in range(count):
        await flow_slots_tick(i)
        await wayline.sleep(seconds)
    return count


@dataclass
class Poll:
    topic: str
    ended: float
    got: list[Delivery]


class Receives:
    """Every flow receive of a world: its topic, when it ended, what it brought; and how many
    were in flight at once at most."""

    def __init__(self, world: Any) -> None:
        self.polls: list[Poll] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.pairing = False
        """Hold a receive that brought something until another flow topic's receive brings
        something too (3 s at most), so both hand their messages to the worker at once."""
        self.paired = False
        self._first: tuple[str, asyncio.Future[None]] | None = None
        self._receive = world.receive
        world.receive = self.receive

    async def receive(self, topic: str, **kw: Any) -> list[Delivery]:
        if not topic.startswith(FLOW_TOPIC):
            return list(await self._receive(topic, **kw))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            got = list(await self._receive(topic, **kw))
        finally:
            self.in_flight -= 1
        self.polls.append(Poll(topic, time.time(), got))
        if got and self.pairing:
            await self._pair(topic)
        return got

    async def _pair(self, topic: str) -> None:
        if self._first is None:
            first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._first = (topic, first)
            try:
                await asyncio.wait_for(asyncio.shield(first), 3.0)
            except TimeoutError:
                pass
            finally:
                self._first = None
        elif self._first[0] != topic and not self._first[1].done():
            self.paired = True
            self.pairing = False
            self._first[1].set_result(None)

    def empty_polls_while_waiting(self, run_id: str) -> list[int]:
        """For each flow message of ``run_id`` received, how many empty receives of another
        flow topic ended while it was due and not yet received."""
        out = []
        for poll in self.polls:
            for d in poll.got:
                if (d.payload or {}).get("runId") != run_id or d.due_at is None:
                    continue
                out.append(
                    sum(
                        1
                        for p in self.polls
                        if not p.got and p.topic != poll.topic and d.due_at < p.ended < poll.ended
                    )
                )
        return out


async def test_a_due_wake_waits_for_no_other_topics_empty_poll_with_one_flow_slot(
    engine: Engine,
) -> None:
    receives = Receives(engine.world)
    quick = settings(prompt_wake_seconds=0)  # every sleep is woken by its delayed message
    count = 6
    async with engine.worker([flow_slots_sleepy], flow_concurrency=1, settings=quick):
        handle = await engine.client.start(flow_slots_sleepy, count)
        assert await handle.result(timeout=60) == count
    waits = receives.empty_polls_while_waiting(handle.run_id)
    assert len(waits) >= 1 + count  # its start and each sleep's wake, at least
    # Each wake was taken by a receive of its own route that was already waiting for it. A
    # slot held through a poll made nearly every wake wait for one or two empty 0.5 s polls
    # of the other flow topics (2081691: about 1.5 on average); only a poll that happens to
    # end in the moment between a wake's due time and its receipt counts here now.
    assert sum(waits) <= len(waits) // 3, waits


async def test_every_flow_topic_polls_at_once_while_the_only_slot_is_free(
    engine: Engine,
) -> None:
    receives = Receives(engine.world)
    async with engine.worker([flow_slots_sleepy], flow_concurrency=1):
        # the workflow's pinned route, its unpinned route and the plain topic: three receives
        # that each wait up to 0.5 s, none of them holding the one slot

        async def all_polling() -> bool:
            return receives.most_in_flight >= 3

        await wait_for(all_polling)
    assert receives.most_in_flight == 3


async def test_a_message_received_with_no_slot_free_waits_in_hand_for_the_only_slot(
    engine: Engine,
) -> None:
    """Two flow topics' receives bring a message each at once, to a worker with one flow slot:
    one is driven, the other waits for the slot (or is handed back if the drive outlasts its
    wait), and the two drives never overlap."""
    receives = Receives(engine.world)
    quick = settings(prompt_wake_seconds=0)
    drives = 0
    most = 0
    async with engine.worker([flow_slots_sleepy], flow_concurrency=1, settings=quick) as worker:
        handle_flow = worker.handler.handle_flow

        async def counted(delivery: Delivery) -> Any:
            nonlocal drives, most
            drives += 1
            most = max(most, drives)
            try:
                return await handle_flow(delivery)
            finally:
                drives -= 1

        worker.handler.handle_flow = counted  # type: ignore[method-assign]
        sleeper = await engine.client.start(flow_slots_sleepy, 1, 1.0)

        async def asleep() -> bool:
            return any(p.got for p in receives.polls) and drives == 0

        await wait_for(asleep)
        # a new run's start comes on the workflow's pinned route, a wake of a run the world
        # does not know on the plain topic: each receive is held until both are in
        receives.pairing = True
        fresh = await engine.client.start(flow_slots_sleepy, 1, 0.0)
        await engine.world.enqueue(FLOW_TOPIC, {"runId": new_run_id(), "reason": "hook"})
        assert await sleeper.result(timeout=60) == 1
        assert await fresh.result(timeout=60) == 1
    assert receives.paired  # both were received at once, with one slot
    assert any(p.got and p.topic == FLOW_TOPIC for p in receives.polls)
    assert most == 1
