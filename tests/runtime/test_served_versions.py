"""A worker of a WorkflowWorker version (``WAYLINE_WORKER_VERSION``) records its version in the
registry, on both worlds, so the operator learns which definition identities and which topics
each version serves; a withdrawn or lapsed worker's version is forgotten."""

from __future__ import annotations

from typing import Any

import wayline
from tests.conftest import WorldFactory
from tests.runtime.harness import settings, wait_for
from wayline.world.registry import merge_served, version_identities, version_topics


@wayline.step(name="served-versions-step")
async def served_versions_step(n: int) -> int:
    return n + 1


@wayline.workflow(name="served-versions-flow")
async def served_versions_flow(n: int) -> int:
    return await served_versions_step(n)


async def test_a_workers_version_is_recorded_and_withdrawn(make_world: WorldFactory) -> None:
    world = await make_world()
    identity = served_versions_flow.identity
    # The worker's first heartbeat is written as it starts, and it counts as alive for three
    # heartbeats (30 s by default). With heartbeats 0.2 s apart it counted for 0.6 s only,
    # and a read late by that much under load found the version gone.
    async with wayline.Worker(
        world, [served_versions_flow], settings=settings(worker_version="v1")
    ):

        async def recorded() -> dict[str, set[str]] | None:
            found = version_identities(await world.list_served(), world.now())
            return found or None

        assert await wait_for(recorded, timeout=10) == {"v1": {identity}}
        topics = version_topics(await world.list_served(), "v1", world.now())
        assert "flow:w:served-versions-flow" in topics
        assert any(t.startswith(f"step:w:served-versions-flow@{identity}-r") for t in topics)
        assert version_topics(await world.list_served(), "v2", world.now()) == []
    # a graceful close withdraws the worker, and with it its version
    assert version_identities(await world.list_served(), world.now()) == {}


@wayline.workflow(name="served-versions-held")
async def served_versions_held(token: str) -> object:
    await served_versions_step(1)
    return await wayline.create_hook(token)


async def test_a_run_left_by_its_version_names_that_version(make_world: WorldFactory) -> None:
    """The version's pods went (a retired version: its Deployment deleted, its workers
    withdrawn on SIGTERM): the run pinned to it says which version served it last."""
    world = await make_world()
    client = wayline.Client(world)
    worker = wayline.Worker(world, [served_versions_held], settings=settings(worker_version="v1"))
    async with worker:
        run = await client.start(served_versions_held, "served-versions-left")

        async def waiting() -> bool:
            info = await world.get_run(run.run_id)
            return info is not None and info.status is wayline.RunStatus.RUNNING

        await wait_for(waiting, timeout=10)
        assert await client.waiting_for_worker(run.run_id) is None
    said = await client.waiting_for_worker(run.run_id)
    assert said is not None and said.endswith("(last served by WorkflowWorker version v1)"), said


def _beat(worker: str, until: float, version: str | None) -> dict[str, Any]:
    entry = {"key": "k", "workflow": "w", "identity": "i1", "worker": worker, "liveUntil": until}
    return {**entry, "version": version} if version else entry


def test_versions_keep_only_live_workers_and_two_versions_share_an_entry() -> None:
    stored = merge_served(None, _beat("a", 100.0, "v1"), now=10.0)
    stored = merge_served(stored, _beat("b", 100.0, "v2"), now=10.0)
    assert stored is not None and stored["versions"] == {"a": "v1", "b": "v2"}
    assert "version" not in stored
    assert version_identities([stored], now=50.0) == {"v1": {"i1"}, "v2": {"i1"}}
    # a's heartbeat lapsed: its version is dropped at the next write, and not read before
    assert version_identities([stored], now=101.0) == {}
    later = merge_served(stored, _beat("b", 300.0, "v2"), now=200.0)
    assert later is not None and later["versions"] == {"b": "v2"}
    # a worker of no version is counted as serving, and names no version
    plain = merge_served(later, _beat("c", 300.0, None), now=200.0)
    assert plain is not None and plain["versions"] == {"b": "v2"}
    assert version_identities([{"identity": "i1", "workers": {"x": 1e12}}]) == {}
