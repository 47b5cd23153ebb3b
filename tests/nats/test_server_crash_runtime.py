"""SIGKILL nats-server in the middle of a run of many steps, and while a wake is armed; restart
it. The run completes, every step body ran once (the step in flight at the crash at most
twice), there are no duplicate terminal events, and the delayed wake still fires."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import wayline
from tests.nats_fixtures import NatsServer, OpenWorlds, wait_reconnected
from tests.runtime import flows
from tests.runtime.harness import of_type, settings, wait_for
from wayline._core.events import EventType


async def test_sigkill_nats_server_mid_run(
    nats_server_own: NatsServer, open_own_world: OpenWorlds, tmp_path: Path
) -> None:
    world = await open_own_world(visibility_seconds=2)
    client = wayline.Client(world)
    log = str(tmp_path / "log")
    n = 40
    async with wayline.Worker(world, [flows.many_steps], settings=settings()):
        handle = await client.start(flows.many_steps, log, n, 2.0)

        async def some_steps() -> bool:
            return len(flows.lines(log)) >= 8

        await wait_for(some_steps, timeout=30)
        nats_server_own.restart(kill=True)  # mid-run
        await wait_reconnected(world)

        async def sleeping() -> bool:
            try:
                events = await world.list_events(handle.run_id)
            except wayline.WaylineError:
                return False
            return bool(of_type(events, EventType.WAIT_CREATED))

        await wait_for(sleeping, timeout=60)
        nats_server_own.restart(kill=True)  # while the 2 s wake is armed
        await wait_reconnected(world)
        assert await handle.result(timeout=90) == sum(range(n))
        events = await handle.events()
    runs = Counter(flows.lines(log))
    assert set(runs) == {str(i) for i in range(n)}
    assert sum(1 for c in runs.values() if c > 1) <= 2, runs  # at most the in-flight ones
    completed = Counter(e.correlation_id for e in of_type(events, EventType.STEP_COMPLETED))
    assert len(completed) == n and set(completed.values()) == {1}
    assert len(of_type(events, EventType.RUN_COMPLETED)) == 1
    [wait] = of_type(events, EventType.WAIT_COMPLETED)
    assert wait.created_at >= of_type(events, EventType.WAIT_CREATED)[0].data["resumeAt"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    await asyncio.sleep(0)
