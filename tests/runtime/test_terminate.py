"""``Client.terminate`` and ``Client.open_hooks`` on every world: a terminated run ends at
once without compensations, and a parent waiting on it hears of its end."""

from __future__ import annotations

from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.events import EventType, RunStatus
from wayline.world import World

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_terminate_ends_a_run_without_compensations(world: World, tmp_path: Path) -> None:
    log = str(tmp_path / "log")
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.saga_waits, flows.kid_waits], settings=settings()):
        run = await client.start(flows.saga_waits, log, "o1")
        other = await client.start(flows.kid_waits, "tok-other")
        await wait_for(lambda: world.get_hook("saga:o1"))
        await wait_for(lambda: world.get_hook("tok-other"))
        hooks = await client.open_hooks()
        assert sorted(h["token"] for h in hooks) == ["saga:o1", "tok-other"]
        assert [h["token"] for h in await client.open_hooks(other.run_id)] == ["tok-other"]
        assert await client.terminate(run.run_id, reason="ops said stop") is True
        assert await client.terminate(run.run_id) is False  # once
        info = await client.get_run(run.run_id)
        assert info.status is RunStatus.CANCELLED
        with pytest.raises(wayline.RunCancelledError, match=r"cancelled: ops said stop$"):
            await run.result(timeout=5)  # the reason reaches the caller, not only the log
        assert [h["token"] for h in await client.open_hooks()] == ["tok-other"]
        await client.resume_hook("tok-other", 1)
        assert await other.result(timeout=10) == 1
    events = await world.list_events(run.run_id)
    assert not any(e.type is EventType.RUN_COMPENSATING for e in events)
    assert events[-1].data == {"reason": "ops said stop", "terminated": True}
    assert [line.split(" key=")[0] for line in flows.lines(log)] == ["reserve o1", "charge o1"]


async def test_open_hooks_lists_a_hook_that_keeps_its_token_after_a_payload(
    world: World,
) -> None:
    """A hook that received its first payload still holds its token (a second payload is kept
    for ``async for``, and another hook cannot take the token): it is listed, as received,
    until its run ends."""
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.hook_kept], settings=settings()):
        run = await client.start(flows.hook_kept, "tok-kept")
        await wait_for(lambda: world.get_hook("tok-kept"))
        [waiting] = await client.open_hooks()
        assert (waiting["token"], waiting["status"]) == ("tok-kept", "waiting")
        await client.resume_hook("tok-kept", 1)

        async def received() -> list[dict[str, object]] | None:
            hooks = await client.open_hooks()
            return hooks if hooks and hooks[0]["status"] == "received" else None

        [kept] = await wait_for(received)
        assert (kept["token"], kept["runId"]) == ("tok-kept", run.run_id)
        assert await client.terminate(run.run_id) is True
        assert await client.open_hooks() == []


async def test_a_terminated_child_reports_to_its_parent(world: World) -> None:
    client = wayline.Client(world)
    apps = [flows.parent_waits, flows.kid_waits]
    async with wayline.Worker(world, apps, settings=settings()):
        parent = await client.start(flows.parent_waits, "tok-kid")
        hook = await wait_for(lambda: world.get_hook("tok-kid"))
        assert await client.terminate(hook.run_id) is True

        async def parent_ended() -> bool:
            info = await client.get_run(parent.run_id)
            return info.status.terminal

        await wait_for(parent_ended, timeout=10)  # it heard, rather than waiting for ever
    info = await client.get_run(parent.run_id)
    assert info.status is RunStatus.FAILED and "cancelled" in str(info.error)
