"""World contract, the lifecycle and clock ports: ``start`` is idempotent and ``close`` safe to
call twice, ``async with`` opens and closes, a checkup reports rather than raises, and the
world's time is the epoch's."""

from __future__ import annotations

import time

from tests.conftest import WorldFactory
from wayline.world import World


async def test_start_twice_and_close_twice(make_world: WorldFactory) -> None:
    world = await make_world()
    await world.start()  # again: idempotent
    await world.enqueue("flow", {"runId": "contract-lifecycle"})
    [d] = await world.receive("flow", wait_seconds=2)
    assert await world.ack(d) is True
    await world.close()
    await world.close()


async def test_a_checkup_reports_findings(world: World) -> None:
    findings = await world.checkup()
    assert findings and all(f.level in ("ok", "warn", "fail") for f in findings)


async def test_the_worlds_time_is_the_epochs(world: World) -> None:
    assert abs(world.now() - time.time()) < 60
