"""A run id started again after its run was archived: the archived run's out-of-line payloads
stay readable whatever is cleaned up afterwards (the new run, other expired runs), and the new
run's stay readable while it lives. Both worlds; the archive is read as a reader of the
archive meets it (its copies of the events, references resolved through the world's store)."""

from __future__ import annotations

import pytest

import wayline
from tests.blobs import flows
from tests.blobs.stores import archived_events, archived_input, incarnations, stored
from tests.runtime.harness import Engine, wait_for
from wayline._core.ids import new_run_id
from wayline.world import World

INPUT = 300 * 1024
"""Characters of the inputs: over the 256 KiB inline threshold, so stored out of line."""


async def _hook_open(world: World, token: str) -> bool:
    hook = await world.get_hook(token)
    return hook is not None and hook.active


@pytest.mark.parametrize("again", ["same input", "other input"])
async def test_cleanup_of_a_reused_id_keeps_the_archived_runs_input(
    engine: Engine, again: str
) -> None:
    """A cleanup of the new run deleted every object under the run id's name on NATS, the
    archived run's input with it (shared outright when the inputs are the same)."""
    first = "a" * INPUT
    second = first if again == "same input" else "b" * INPUT
    run_id = new_run_id()
    async with engine.worker([flows.echo]):
        old = await engine.client.start_with(wayline.StartOptions(run_id=run_id), flows.echo, first)
        assert await old.result(timeout=60) == first
        assert await engine.world.archive_runs(older_than=0) == 1
        new = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), flows.echo, second
        )
        assert await new.result(timeout=60) == second
    assert await engine.world.delete_runs(older_than=0) == 1
    assert await engine.world.get_run(run_id) is None
    assert await engine.world.archived_count() == 1
    fresh = await engine.make_world()  # nothing cached
    assert await archived_input(fresh, run_id) == {"args": [first]}
    if second != first:  # the new run's own input went with it
        assert not await stored(fresh, run_id, {"args": [second]})
    else:  # the new run's object went; the archived run's stays (on NATS also the copy
        # without an incarnation, which the version before incarnations reads it by)
        left = await incarnations(fresh, run_id, {"args": [first]})
        named = (await archived_events(fresh, run_id))[0].data["input"].get("incarnation")
        assert sorted(map(str, left)) == sorted(map(str, {named, None}))


async def test_a_live_run_of_a_reused_id_and_the_archived_run_keep_their_inputs(
    engine: Engine,
) -> None:
    """The id is live again (same input) while other runs expire and are cleaned up, then it
    ends and is cleaned up too: each step leaves what the other incarnation names."""
    value = "c" * INPUT
    run_id = new_run_id()
    async with engine.worker([flows.held, flows.echo]):
        old = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), flows.held, value, f"old-{run_id}"
        )
        await wait_for(lambda: _hook_open(engine.world, f"old-{run_id}"), timeout=60)
        await engine.client.resume_hook(f"old-{run_id}", None)
        assert await old.result(timeout=60) == INPUT
        assert await engine.world.archive_runs(older_than=0) == 1
        new = await engine.client.start_with(
            wayline.StartOptions(run_id=run_id), flows.held, value, f"new-{run_id}"
        )
        await wait_for(lambda: _hook_open(engine.world, f"new-{run_id}"), timeout=60)
        expired = await engine.client.start(flows.echo, "e" * INPUT)
        assert await expired.result(timeout=60) == "e" * INPUT
        assert await engine.world.delete_runs(older_than=0) == 1  # the expired run only
        fresh = await engine.make_world()
        assert await archived_input(fresh, run_id) == {"args": [value, f"old-{run_id}"]}
        live = await wayline.Client(fresh).get_run(run_id)
        assert live.input == {"args": [value, f"new-{run_id}"]}
        await engine.client.resume_hook(f"new-{run_id}", None)
        assert await new.result(timeout=60) == INPUT
    assert await engine.world.delete_runs(older_than=0) == 1
    assert await archived_input(await engine.make_world(), run_id) == {
        "args": [value, f"old-{run_id}"]
    }
