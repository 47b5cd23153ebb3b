"""A worker's heartbeat says how many deliveries it holds (bodies and steps under way), on
both worlds: the operator removes the pods holding the fewest first when it scales a version
down (docs/operator.md, "Which pods a scale-down removes")."""

from __future__ import annotations

from pathlib import Path

import wayline
from tests.conftest import WorldFactory
from tests.runtime.harness import file_exists, settings, wait_for
from wayline.world.registry import held_by_worker, merge_served


@wayline.step(name="held-deliveries-step")
async def held_deliveries_step(marker: str) -> str:
    """Under way until ``marker`` exists."""
    await wait_for(file_exists(marker), timeout=60, interval=0.05)
    return marker


@wayline.workflow(name="held-deliveries-flow")
async def held_deliveries_flow(marker: str) -> str:
    return await held_deliveries_step(marker)


async def test_a_heartbeat_counts_the_deliveries_under_way(
    make_world: WorldFactory, tmp_path: Path
) -> None:
    world = await make_world()
    client = wayline.Client(world)
    worker = wayline.Worker(
        world, [held_deliveries_flow], settings=settings(), heartbeat_seconds=0.2
    )
    async with worker:

        async def held(busy: bool) -> bool:
            count = (await world.held_deliveries(world.now())).get(worker.worker_id)
            return count is not None and (count >= 1 if busy else count == 0)

        await wait_for(lambda: held(False), timeout=10)  # idle: known to hold nothing
        marker = str(tmp_path / "held-deliveries-done")
        run = await client.start(held_deliveries_flow, marker)
        await wait_for(lambda: held(True), timeout=10)  # the step's delivery, under way
        Path(marker).touch()  # noqa: ASYNC240 - a tiny local marker file
        assert await run.result(timeout=30) == marker
        await wait_for(lambda: held(False), timeout=10)
    # a graceful close withdraws the worker: it is no longer listed at all
    assert worker.worker_id not in await world.held_deliveries(world.now())


def _beat(worker: str, until: float, **more: object) -> dict[str, object]:
    return {"key": "k", "workflow": "w", "worker": worker, "liveUntil": until, **more}


def test_a_count_that_is_not_one_reads_as_unknown_and_a_lapsed_workers_is_dropped() -> None:
    """Anyone can write into a NATS bucket: a count that is not a whole number of zero or more
    (a bool, a negative, a string) is not kept, so its worker reads as unknown, not idle."""
    stored = merge_served(None, _beat("a", 100.0, held=2), now=10.0)
    for bad in (True, -1, "3", 1.5):
        stored = merge_served(stored, _beat("b", 100.0, held=bad), now=10.0)
        assert stored is not None and held_by_worker([stored], 10.0) == {"a": 2, "b": None}
    # a heartbeat after a's liveness lapsed: its count goes with it
    stored = merge_served(stored, _beat("b", 300.0, held=0), now=200.0)
    assert stored is not None and stored["heldBy"] == {"b": 0}
    assert held_by_worker([stored], 200.0) == {"b": 0}
