"""Routing, not bouncing: workers of one application never receive, and so never burn the
delivery budget of, another application's runs (counter tests on every world)."""

from __future__ import annotations

import asyncio
from typing import Any

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.events import EventType
from wayline.world import Delivery


@wayline.step(name="routing_tests.slow_add")
async def slow_add(a: int, b: int) -> int:
    await asyncio.sleep(0.25)
    return a + b


@wayline.workflow(name="routing_tests.slow_sum")
async def slow_sum(n: int) -> int:
    total = 0
    for i in range(n):
        total = await slow_add(total, i)
    return total


async def test_another_applications_worker_never_burns_a_run(engine: Engine) -> None:
    """App A (``chain``) has no worker for a while; app B (``fan_out``) has two. With a
    delivery budget of 1, a single bounce would be fatal: none of A's runs fails, and they
    all complete once A's worker appears."""
    tight = settings(max_queue_deliveries=1)
    async with (
        engine.worker([flows.fan_out], settings=tight),
        engine.worker([flows.fan_out], settings=tight, world=await engine.make_world()),
    ):
        a_runs = [await engine.client.start(flows.chain, 3) for _ in range(6)]
        b_run = await engine.client.start(flows.fan_out, 3)
        assert await b_run.result(timeout=20) == [0, 2, 4]
        await asyncio.sleep(6.0)  # A is away (a rollout): B's workers see nothing of A
        for handle in a_runs:
            assert await handle.status() is wayline.RunStatus.PENDING
            why = await engine.client.waiting_for_worker(handle.run_id)
            assert why is not None and "waiting_for_worker" in why and "'chain'" in why
        async with engine.worker([flows.chain], settings=tight):
            assert [await h.result(timeout=30) for h in a_runs] == [3] * 6


async def test_a_queue_groups_runs_for_the_workers_of_that_queue(engine: Engine) -> None:
    async with engine.worker([flows.chain, flows.fan_out], queue="other"):
        handle = await engine.client.start_with(
            wayline.StartOptions(queue="payments"), flows.chain, 2
        )
        await asyncio.sleep(1.0)
        assert await handle.status() is wayline.RunStatus.PENDING  # not this worker's queue
        async with engine.worker([flows.chain], queue="payments"):
            assert await handle.result(timeout=20) == 1


async def test_a_run_no_live_worker_serves_says_so(engine: Engine) -> None:
    handle = await engine.client.start(flows.chain, 2)
    why = await engine.client.waiting_for_worker(handle.run_id)
    assert why == (
        "waiting_for_worker: no live worker serves workflow 'chain' "
        f"identity {flows.chain.identity[:12]} revision 1"
    )
    async with engine.worker([flows.chain], heartbeat_seconds=0.2):
        assert await handle.result(timeout=20) == 1
        other = await engine.client.start_with(wayline.StartOptions(queue="night"), flows.chain, 3)
        why = str(await engine.client.waiting_for_worker(other.run_id))
        assert why.startswith("waiting_for_worker: no live worker serves workflow 'chain'")
        assert why.endswith("on queue 'night'")
        assert await engine.client.waiting_for_worker(handle.run_id) is None  # it ended
        late = await engine.client.start(flows.fan_out, 1)
        assert "'fan_out'" in str(await engine.client.waiting_for_worker(late.run_id))
        async with engine.worker([flows.fan_out], heartbeat_seconds=0.2) as worker:
            assert await late.result(timeout=20) == [0]
            served = {e["workflow"] for e in await engine.world.list_served()}
            assert served == {"chain", "fan_out"}
            assert worker.worker_id in {e["worker"] for e in await engine.world.list_served()}
    # the workers are gone: after three missed heartbeats the runs left say so again
    paused = await engine.client.start(flows.chain, 1)
    await asyncio.sleep(0.7)
    assert "'chain'" in str(await engine.client.waiting_for_worker(paused.run_id))


async def test_a_queue_worker_does_not_count_for_a_run_started_without_a_queue(
    engine: Engine,
) -> None:
    """A worker started with ``queue=`` consumes that queue's route (and the plain topic),
    never a workflow's route: a run started without a queue stays pending beside it, and says
    it waits for a worker. The workers beat at the default period: what they say of the runs
    beside them is read while they are alive, and at 0.2 s (alive for 0.6 s) a heartbeat late
    under load made a read find no live worker."""
    async with engine.worker([flows.chain], queue="gold"):
        handle = await engine.client.start(flows.chain, 2)
        await asyncio.sleep(0.8)
        assert await handle.status() is wayline.RunStatus.PENDING
        why = await engine.client.waiting_for_worker(handle.run_id)
        assert why is not None
        assert why.startswith("waiting_for_worker: no live worker serves workflow 'chain'")
        assert "queue" not in why
        queued = await engine.client.start_with(wayline.StartOptions(queue="gold"), flows.chain, 2)
        assert await engine.client.waiting_for_worker(queued.run_id) is None
        assert await queued.result(timeout=20) == 1
        async with engine.worker([flows.chain]):
            assert await engine.client.waiting_for_worker(handle.run_id) is None
            assert await handle.result(timeout=20) == 1


async def test_a_worker_stopped_gracefully_no_longer_counts_as_live(engine: Engine) -> None:
    """A graceful close withdraws the worker from the registry at once (not three heartbeats,
    30 s by default, later); another worker still serving the same definition still counts."""
    async with engine.worker([flows.chain]):
        async with engine.worker([flows.chain], world=await engine.make_world()):
            pass  # the second worker heartbeats last, then stops
        handle = await engine.client.start(flows.chain, 2)
        assert await engine.client.waiting_for_worker(handle.run_id) is None
        assert await handle.result(timeout=20) == 1
    late = await engine.client.start(flows.chain, 2)
    why = await engine.client.waiting_for_worker(late.run_id)
    assert why is not None and "'chain'" in why
    async with engine.worker([flows.chain]):
        assert await engine.client.waiting_for_worker(late.run_id) is None
        assert await late.result(timeout=20) == 1


async def test_graceful_hand_backs_do_not_spend_the_delivery_budget(engine: Engine) -> None:
    """Three rollouts in a row, each worker stopped gracefully mid-run (its delivery handed
    back at the next checkpoint): with a budget of one delivery, the run still completes."""
    tight = settings(max_queue_deliveries=1)
    handle = await engine.client.start(slow_sum, 24)

    async def steps_done() -> int:
        return len(of_type(await handle.events(), EventType.STEP_COMPLETED))

    for _ in range(3):
        before = await steps_done()

        async def progressed(before: int = before) -> bool:
            return await steps_done() > before

        async with engine.worker([slow_sum], settings=tight):
            # this worker holds the run's delivery (a step of its own completed, the next
            # runs): a loaded machine may take longer than a fixed pause to get there
            await wait_for(progressed, timeout=20)
        assert await handle.status() is wayline.RunStatus.RUNNING
    async with engine.worker([slow_sum], settings=tight):
        assert await handle.result(timeout=30) == sum(range(24))


async def test_a_released_delivery_keeps_its_attempt(engine: Engine) -> None:
    world = engine.world
    mid = await world.enqueue("flow", {"x": 1})
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.release(d) is True
    [again] = await world.receive("flow", wait_seconds=2)
    assert (again.message_id, again.attempt) == (mid, 1)
    assert await world.release(d) is False  # stale: the message is held again
    assert await world.retry(again, 0) is True
    [third] = await world.receive("flow", wait_seconds=2)
    assert (third.message_id, third.attempt) == (mid, 2)
    assert await world.ack(third) is True


def _count_deliveries(world: wayline.World, into: list[str]) -> None:
    """Record the run of every delivery this world connection hands its worker."""
    receive = world.receive

    async def counting(topic: str, **kw: Any) -> list[Delivery]:
        got = await receive(topic, **kw)
        into.extend(str((d.payload or {}).get("runId")) for d in got)
        return got

    world.receive = counting  # type: ignore[method-assign]


async def test_a_run_pinned_to_one_revision_never_reaches_a_worker_of_another(
    engine: Engine,
) -> None:
    """Workers of revisions 1 and 2 of one workflow on one world: each receives only runs
    pinned to its own definition (deliveries counted), and a v1 run with only v2 alive waits,
    saying for which definition, until a v1 worker returns."""
    v2_world = await engine.make_world()
    to_v2: list[str] = []
    _count_deliveries(v2_world, to_v2)
    async with (
        engine.worker([flows.versioned_v1], heartbeat_seconds=0.2),
        engine.worker([flows.versioned_v2], world=v2_world),
    ):
        v1 = [await engine.client.start(flows.versioned_v1, i) for i in range(4)]
        v2 = [await engine.client.start(flows.versioned_v2, i) for i in range(4)]
        assert [await h.result(timeout=20) for h in v1] == [f"v1:{i + 1}" for i in range(4)]
        assert [await h.result(timeout=20) for h in v2] == [f"v2:{i + 2}" for i in range(4)]
    assert {h.run_id for h in v2} <= set(to_v2)
    assert not {h.run_id for h in v1} & set(to_v2)
    async with engine.worker([flows.versioned_v2], world=v2_world):  # v1 is gone
        late = await engine.client.start(flows.versioned_v1, 10)
        await asyncio.sleep(1.0)  # v1's last heartbeat has run out; v2 sees nothing of it
        assert await late.status() is wayline.RunStatus.PENDING
        why = await engine.client.waiting_for_worker(late.run_id)
        assert why == (
            "waiting_for_worker: no live worker serves workflow 'versioned' "
            f"identity {flows.versioned_v1.identity[:12]} revision 1"
        )
        async with engine.worker([flows.versioned_v1]):
            assert await late.result(timeout=20) == "v1:11"
    assert late.run_id not in to_v2


async def test_a_delayed_hand_back_keeps_its_attempt(engine: Engine) -> None:
    """What a step waiting for a concurrency slot does with its delivery."""
    world = engine.world
    mid = await world.enqueue("flow", {"x": 2})
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.release(d, 2.0) is True
    assert await world.receive("flow", wait_seconds=0.2) == []  # not yet due
    [again] = await world.receive("flow", wait_seconds=5)
    assert (again.message_id, again.attempt) == (mid, 1)
    assert await world.ack(again) is True


async def test_a_queued_run_of_another_revision_waits_blocked_and_is_not_sent_round(
    engine: Engine,
) -> None:
    """A queue's route is one for every definition: a v2 worker on the queue that receives a
    v1 run must not send it on (to the same queue, so straight back to itself, forever); the
    run waits blocked, saying for which definition, and a v1 worker on the queue drives it."""
    v2_world = await engine.make_world()
    to_v2: list[str] = []
    _count_deliveries(v2_world, to_v2)
    async with engine.worker([flows.versioned_v2], world=v2_world, queue="q"):
        late = await engine.client.start_with(
            wayline.StartOptions(queue="q"), flows.versioned_v1, 10
        )
        started = asyncio.get_running_loop().time()

        async def blocked() -> bool:
            return await late.status() is wayline.RunStatus.BLOCKED

        await wait_for(blocked, timeout=20)  # the v2 worker received it (late when loaded)
        waited = asyncio.get_running_loop().time() - started
        await asyncio.sleep(max(0.0, 2.0 - waited))  # at least 2 s to show any loop
        assert to_v2.count(late.run_id) <= 3  # not a loop of hand-ons (hundreds a second)
        async with engine.worker([flows.versioned_v1], queue="q"):
            # the run's message goes to whichever worker on the queue takes it first, the v2
            # one handing it back for 1-3 s each time it wins: a geometric tail (about 14 s seen
            # under load), so wait well past 30 s
            assert await late.result(timeout=90) == "v1:11"
