"""Business ids for child runs: ``child_with(ChildOptions(id="ship-123"), wf, ...)`` names the
child as ``StartOptions(id=...)`` names a run, on every world."""

from __future__ import annotations

import pytest

import wayline
from tests.runtime.harness import Engine
from wayline._core.events import EventType
from wayline.world.business_ids import generation_run_id, newest_generation


@wayline.workflow
async def cbid_kid(order: str) -> str:
    return f"shipped {order}"


@wayline.workflow
async def cbid_holder(token: str) -> str:
    return await wayline.create_hook(token, type=str)


@wayline.workflow
async def cbid_parent(order: str) -> str:
    shipped = await wayline.child_with(wayline.ChildOptions(id=f"ship-{order}"), cbid_kid, order)
    await wayline.create_hook(f"cbid-after-{order}", type=str)  # a replay after the child
    return shipped


@wayline.workflow
async def cbid_tries(order: str) -> str:
    try:
        return await wayline.child_with(wayline.ChildOptions(id=f"ship-{order}"), cbid_kid, order)
    except wayline.ChildFailedError as err:
        return f"{err.error['code']} {err.child_run_id}"


async def test_a_child_with_an_id_is_found_by_it_and_replays_to_the_same_run(
    engine: Engine,
) -> None:
    client = engine.client
    async with engine.worker([cbid_parent, cbid_kid]):
        parent = await client.start(cbid_parent, "A")
        await client.wait_for_hook("cbid-after-A", timeout=10)
    info = await client.get_run("ship-A")  # the child, by its business id
    assert (info.run_id, info.business_id) == (generation_run_id("ship-A", None, 0), "ship-A")
    assert info.output == "shipped A" and info.attributes["parent"]["runId"] == parent.run_id
    async with engine.worker([cbid_parent, cbid_kid]):  # a new worker replays the parent
        await client.resume_hook("cbid-after-A", "ok")
        assert await parent.result(timeout=10) == "shipped A"
    assert await newest_generation(engine.world, "ship-A", None) == 0  # one child run


async def test_a_child_id_held_by_a_live_run_fails_the_wait_and_leaves_that_run_alone(
    engine: Engine,
) -> None:
    """Temporal's "workflow already started": while a run under the id is live no child is
    started; once it ended the id's next run is the child."""
    client = engine.client
    holder = await client.start_with(wayline.StartOptions(id="ship-B"), cbid_holder, "hold-B")
    async with engine.worker([cbid_tries, cbid_kid, cbid_holder]):
        refused = await client.start(cbid_tries, "B")
        assert await refused.result(timeout=10) == f"RUN_ALREADY_EXISTS {holder.run_id}"
        assert await holder.status() is not wayline.RunStatus.CANCELLED
        await client.wait_for_hook("hold-B", timeout=10)
        await client.resume_hook("hold-B", "done")
        assert await holder.result(timeout=10) == "done"
        again = await client.start(cbid_tries, "B")
        assert await again.result(timeout=10) == "shipped B"
    info = await client.get_run("ship-B")
    assert info.run_id == generation_run_id("ship-B", None, 1)  # the id's next run
    assert info.attributes["parent"]["runId"] == again.run_id


def test_a_bad_child_id_is_refused_before_anything_is_written() -> None:
    with pytest.raises(wayline.InvalidIdError, match="1 to 256 characters"):
        wayline.ChildOptions(id="")
    with pytest.raises(wayline.InvalidIdError, match="is a run id"):
        wayline.ChildOptions(id="wf_" + "0" * 32)


async def test_a_start_that_takes_the_id_between_the_claim_and_the_child_wins(
    engine: Engine,
) -> None:
    """The window between the parent's claim (``child_created``, naming the id's next run) and
    the child's ``run_created``: a client start under the same id takes that run first. The
    parent does not wait on a run that is not its child: its wait fails as above."""
    world = engine.world
    original = world.append
    other = wayline.Client(await engine.make_world())  # its writes do not pass the wrapper
    taken: list[str] = []

    async def append_in_window(run_id, events, *, expected_seq=None):  # type: ignore[no-untyped-def]
        created = events[0].data if events[0].type is EventType.RUN_CREATED else {}
        if created.get("businessId") == "ship-D" and created.get("parent") and not taken:
            start = wayline.StartOptions(id="ship-D")
            taken.append((await other.start_with(start, cbid_holder, "hold-D")).run_id)
        return await original(run_id, events, expected_seq=expected_seq)

    world.append = append_in_window  # type: ignore[method-assign]
    async with engine.worker([cbid_tries, cbid_kid, cbid_holder]):
        refused = await engine.client.start(cbid_tries, "D")
        assert await refused.result(timeout=10) == f"RUN_ALREADY_EXISTS {taken[0]}"
        await engine.client.wait_for_hook("hold-D", timeout=10)  # the winner runs on
        await engine.client.resume_hook("hold-D", "done")
        assert await engine.client.handle(taken[0]).result(timeout=10) == "done"
