"""A ``continue_as_new`` chain after a deploy: its next run is pinned afresh, by the worker
that begins it, so a looping workflow moves to the version that is current (a worker that is
not draining) instead of keeping the old version alive for ever; one that continues with
``continue_as_new_keeping_version`` stays on its version. On every world."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NoReturn

import wayline
from tests.runtime.harness import Engine, settings, wait_for


async def _first_then_continue(token: str, n: int, go_on: Callable[..., NoReturn]) -> str:
    """Version 1's body: the chain's first run waits on hook ``token``, then continues."""
    if n == 0:
        await wayline.create_hook(token)
        go_on(token, n + 1)
    return f"v1:{n}"


@wayline.workflow(name="chain-versions.loop")
async def loop_v1(token: str, n: int) -> str:
    return await _first_then_continue(token, n, wayline.continue_as_new)


@wayline.workflow(name="chain-versions.loop", revision=2)
async def loop_v2(token: str, n: int) -> str:
    return f"v2:{n}"


@wayline.workflow(name="chain-versions.kept")
async def kept_v1(token: str, n: int) -> str:
    return await _first_then_continue(token, n, wayline.continue_as_new_keeping_version)


@wayline.workflow(name="chain-versions.kept", revision=2)
async def kept_v2(token: str, n: int) -> str:
    return f"v2:{n}"


async def _pinned_revision(engine: Engine, run_id: str) -> Any:
    info = await engine.world.get_run(run_id)
    pin = info.attributes.get("definition") if info is not None else None
    return pin.get("revision") if isinstance(pin, dict) else None


async def _deployed_after_the_first_run(
    engine: Engine, old: Any, new: Any, name: str, token: str
) -> tuple[str, str]:
    """A chain's first run begun on version 1, then resumed once version 1 drains and
    version 2 is current: (the chain's outcome, its last run's id)."""
    async with engine.worker([old], heartbeat_seconds=0.2):
        handle = await engine.client.start(name, token, 0)
        assert await wait_for(lambda: _pinned_revision(engine, handle.run_id)) == 1
    drain = settings(worker_draining=True)
    async with (
        engine.worker([old], world=await engine.make_world(), settings=drain),
        engine.worker([new], world=await engine.make_world()),
    ):
        await engine.client.resume_hook(token)
        outcome = await handle.result(timeout=30)
    return outcome, handle.run_id


async def test_a_chain_moves_to_the_current_version_at_its_next_run(engine: Engine) -> None:
    outcome, last = await _deployed_after_the_first_run(
        engine, loop_v1, loop_v2, "chain-versions.loop", "chain-versions-loop"
    )
    assert outcome == "v2:1"
    assert await _pinned_revision(engine, last) == 2


async def test_a_chain_that_keeps_its_version_stays_on_it(engine: Engine) -> None:
    outcome, last = await _deployed_after_the_first_run(
        engine, kept_v1, kept_v2, "chain-versions.kept", "chain-versions-kept"
    )
    assert outcome == "v1:1"
    assert await _pinned_revision(engine, last) == 1


async def test_a_queue_chain_is_not_begun_by_a_draining_version(engine: Engine) -> None:
    # A queue has one route for every version, so the draining worker receives the next run's
    # first delivery: it must hand it back rather than pin the run to a version on its way out.
    queue, token = "chain-versions-q", "chain-versions-queued"
    options = wayline.StartOptions(queue=queue)
    async with engine.worker([loop_v1], queue=queue, heartbeat_seconds=0.2):
        handle = await engine.client.start_with(options, "chain-versions.loop", token, 0)
        assert await wait_for(lambda: _pinned_revision(engine, handle.run_id)) == 1
    drain = settings(worker_draining=True)
    # after a deploy, only the old (draining) version is up yet
    async with engine.worker(
        [loop_v1], world=await engine.make_world(), settings=drain, queue=queue
    ):
        await engine.client.resume_hook(token)

        async def continued() -> str | None:
            info = await engine.world.get_run(handle.run_id)
            return info.continued_as if info is not None else None

        nxt = await wait_for(continued, timeout=20)
        assert nxt is not None
        await asyncio.sleep(2.0)  # the draining worker has had the next run's delivery by now
        nxt_info = await engine.world.get_run(nxt)
        assert nxt_info is not None and nxt_info.started_at is None, nxt_info
        async with engine.worker([loop_v2], world=await engine.make_world(), queue=queue):
            assert await engine.client.handle(nxt).result(timeout=30) == "v2:1"
    assert await _pinned_revision(engine, nxt) == 2
