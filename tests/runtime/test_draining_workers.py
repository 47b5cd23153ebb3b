"""A draining worker (an old WorkflowWorker version on its way out, ``WAYLINE_WORKER_DRAINING``)
keeps driving the runs pinned to its definitions but takes no new run: a run started by name
waits, saying so, until a worker that is not draining takes it, on every world."""

from __future__ import annotations

from typing import Any

import wayline
from tests.runtime.harness import Engine, settings, wait_for
from wayline.cli import build_parser
from wayline.cli.commands import worker_child_argv
from wayline.settings import Settings
from wayline.world.registry import merge_served


@wayline.step(name="draining-workers.v1-step")
async def v1_step(token: str) -> str:
    return f"v1:{token}"


@wayline.step(name="draining-workers.v2-step")
async def v2_step(token: str) -> str:
    return f"v2:{token}"


@wayline.workflow(name="draining-workers.flow")
async def flow_v1(token: str) -> str:
    await wayline.create_hook(token)
    return await v1_step(token)


@wayline.workflow(name="draining-workers.flow", revision=2)
async def flow_v2(token: str) -> str:
    return await v2_step(token)


async def _pinned_revision(engine: Engine, run_id: str) -> Any:
    info = await engine.world.get_run(run_id)
    pin = info.attributes.get("definition") if info is not None else None
    return pin.get("revision") if isinstance(pin, dict) else None


async def test_new_runs_go_to_the_worker_that_is_not_draining(engine: Engine) -> None:
    client = engine.client
    async with engine.worker([flow_v1], heartbeat_seconds=0.2):
        old = await client.start("draining-workers.flow", "draining-old")
        assert await wait_for(lambda: _pinned_revision(engine, old.run_id)) == 1
    drain = settings(worker_draining=True)
    async with engine.worker(
        [flow_v1], world=await engine.make_world(), settings=drain, heartbeat_seconds=0.2
    ):
        # Only a draining worker is up (the new version's pods are not ready): a start waits,
        # unpinned, and says why instead of pinning itself to the old version.
        new = await client.start("draining-workers.flow", "draining-new-1")

        async def says_it_waits() -> str | None:
            said = await client.waiting_for_worker(new.run_id)
            return said if said is not None and "drain" in said else None

        assert await wait_for(says_it_waits)
        assert await _pinned_revision(engine, new.run_id) is None
        # The run pinned to the old version still completes on the draining worker.
        await client.resume_hook("draining-old")
        assert await old.result(timeout=20) == "v1:draining-old"
        async with engine.worker([flow_v2], world=await engine.make_world()):
            name = "draining-workers.flow"
            more = [await client.start(name, f"draining-new-{i}") for i in (2, 3)]
            for i, handle in enumerate([new, *more], start=1):
                assert await handle.result(timeout=20) == f"v2:draining-new-{i}"
                assert await _pinned_revision(engine, handle.run_id) == 2


def test_a_worker_is_told_it_drains_by_its_environment_or_its_command_line() -> None:
    assert Settings.from_env({"WAYLINE_WORKER_DRAINING": "1"}).worker_draining is True
    assert Settings.from_env({}).worker_draining is False
    argv = ["worker", "--app", "m", "--draining", "--world", "sqlite:///x.db"]
    # each child of a supervised worker drains too
    assert "--draining" in worker_child_argv(build_parser().parse_args(argv), 1)


def _beat(worker: str, until: float, draining: bool = False) -> dict[str, Any]:
    entry = {"key": "k", "workflow": "w", "identity": "i1", "worker": worker, "liveUntil": until}
    return {**entry, "draining": True} if draining else entry


def test_the_registry_lists_live_draining_workers_only() -> None:
    stored = merge_served(None, _beat("old", 100.0, draining=True), now=10.0)
    assert stored is not None and stored["drainingWorkers"] == ["old"] and "draining" not in stored
    stored = merge_served(stored, _beat("new", 50.0), now=10.0)
    assert stored is not None and stored["drainingWorkers"] == ["old"]
    # the same worker no longer draining (a pod restarted without the drain) is taken off
    again = merge_served(stored, _beat("old", 100.0), now=20.0)
    assert again is not None and "drainingWorkers" not in again
    # a lapsed draining worker is dropped with its heartbeat
    later = merge_served(stored, _beat("new", 300.0), now=200.0)
    assert later is not None and "drainingWorkers" not in later
