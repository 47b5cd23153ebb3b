"""How the operator starts a WorkflowRun's run under the resource's name (``Reconciler.start``
with ``name``), on both worlds and with no API server: a start repeated for one resource (an
operator crash before its status write) is one run; another resource of the same name waits
while that run is live and starts the name's next run once it ended; a resource whose run an
earlier operator started under its uid's id keeps that run."""

from __future__ import annotations

import uuid

import pytest

import wayline
from tests.conftest import WorldFactory
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.events import EventType
from wayline.world import World
from wayline.world.business_ids import generation_run_id
from wayline_operator.reconcile import IdInUse, Reconciler, run_id_for

SPEC = {"workflow": "kid_waits", "input": "tok-n"}


async def _starts(world: World, run_id: str) -> int:
    events = await world.list_events(run_id)
    return sum(e.type is EventType.RUN_CREATED for e in events)


async def test_a_repeated_start_of_one_resource_is_one_run(make_world: WorldFactory) -> None:
    world = await make_world()
    reconciler, uid = Reconciler(world), str(uuid.uuid4())
    first = await reconciler.start(uid, SPEC, "shop", "order-1")
    again = await reconciler.start(uid, SPEC, "shop", "order-1")
    assert first == again == generation_run_id("order-1", "shop", 0)
    assert await _starts(world, first) == 1
    assert len(await world.list_runs()) == 1


async def test_another_resource_of_the_name_waits_for_its_live_run_then_runs_anew(
    make_world: WorldFactory,
) -> None:
    world = await make_world()
    reconciler, old, new = Reconciler(world), str(uuid.uuid4()), str(uuid.uuid4())
    first = await reconciler.start(old, SPEC, "shop", "order-2")
    with pytest.raises(IdInUse, match=first) as held:
        await reconciler.start(new, SPEC, "shop", "order-2")
    assert held.value.run_id == first and len(await world.list_runs()) == 1
    client = wayline.Client(world, namespace="shop")
    await client.terminate(first, reason="its resource was deleted")
    second = await reconciler.start(new, SPEC, "shop", "order-2")
    assert second == generation_run_id("order-2", "shop", 1)
    assert await reconciler.start(new, SPEC, "shop", "order-2") == second
    assert await client.resolve("order-2") == second
    # the same name in another namespace is another business id
    other = await reconciler.start(str(uuid.uuid4()), SPEC, "warehouse", "order-2")
    assert other == generation_run_id("order-2", "warehouse", 0)


async def test_a_run_started_under_the_uid_is_kept(make_world: WorldFactory) -> None:
    world = await make_world()
    reconciler, uid = Reconciler(world), str(uuid.uuid4())
    legacy = run_id_for(uid)
    client = wayline.Client(world, namespace="shop")
    await client.start_with(wayline.StartOptions(run_id=legacy), "kid_waits", "tok-l")
    assert await reconciler.start(uid, SPEC, "shop", "order-3") == legacy
    # started again in a world without it (another instance's world), still under the uid's id
    fresh = Reconciler(world)
    other = str(uuid.uuid4())
    assert await fresh.start(other, SPEC, "shop", "order-4", known=run_id_for(other)) == (
        run_id_for(other)
    )
    assert sorted(r.run_id for r in await world.list_runs()) == sorted([legacy, run_id_for(other)])
    async with wayline.Worker(world, [flows.kid_waits], settings=settings()):
        await wait_for(lambda: world.get_hook("tok-l"))
        await client.resume_hook("tok-l", {"ok": True})
        assert await client.handle(legacy).result(timeout=20) == {"ok": True}


async def test_a_resource_acts_only_on_a_run_it_started(make_world: WorldFactory) -> None:
    """A ``status.runId`` naming another resource's run (anyone who may patch the status can
    write one) does not make that run this resource's: ``owns`` says so before a cancel, a
    terminate or a pause."""
    world = await make_world()
    reconciler, mine, theirs = Reconciler(world), str(uuid.uuid4()), str(uuid.uuid4())
    my_run = await reconciler.start(mine, SPEC, "shop", "order-own")
    their_run = await reconciler.start(theirs, SPEC, "shop", "order-theirs")
    assert await reconciler.owns(mine, my_run)
    assert not await reconciler.owns(mine, their_run)
    assert await reconciler.owns(mine, run_id_for(mine))  # a resource from before names
