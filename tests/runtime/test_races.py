"""Many callers acting on one run at once: each check-then-append in the client is one fenced
write, so a delivery id is delivered once and a cancel is requested once (counter tests on
every world)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import Engine, of_type, wait_for
from tests.runtime.procs import exec_python
from wayline._core.events import EventType

RACES = 40


async def _parked_hook(engine: Engine, token: str) -> str:
    """A run waiting on ``token``, with no worker left to consume what the callers send."""
    async with engine.worker([flows.kid_waits]):
        handle = await engine.client.start(flows.kid_waits, token)
        await wait_for(lambda: engine.world.get_hook(token))
    return handle.run_id


async def test_concurrent_resumes_with_one_delivery_id_deliver_once(engine: Engine) -> None:
    run_id = await _parked_hook(engine, "tok-race")
    # a second client on its own connection, as a second operator replica would be
    other = wayline.Client(await engine.make_world())
    for i in range(RACES):
        answers = await asyncio.gather(
            engine.client.resume_hook("tok-race", i, delivery_id=f"d-{i}"),
            other.resume_hook("tok-race", i, delivery_id=f"d-{i}"),
            engine.client.resume_hook("tok-race", i, delivery_id=f"d-{i}"),
        )
        assert answers == [run_id] * 3
    received = of_type(await engine.world.list_events(run_id), EventType.HOOK_RECEIVED)
    per_id = Counter(e.data["deliveryId"] for e in received)
    assert per_id == Counter({f"d-{i}": 1 for i in range(RACES)})


async def test_concurrent_cancels_request_once(engine: Engine) -> None:
    run_id = await _parked_hook(engine, "tok-cancel")
    other = wayline.Client(await engine.make_world())
    answers = await asyncio.gather(
        *(c.cancel(run_id, f"by {n}") for n in range(4) for c in (engine.client, other))
    )
    assert answers == [True] * 8
    requested = of_type(await engine.world.list_events(run_id), EventType.RUN_CANCEL_REQUESTED)
    assert len(requested) == 1


async def test_resumes_from_several_processes_deliver_once(engine: Engine, tmp_path: Path) -> None:
    run_id = await _parked_hook(engine, "tok-procs")
    start_at = time.time() + 2.0  # every process is connected by then
    argv = [sys.executable, "-m", "tests.runtime.race_caller", engine.world.url, "tok-procs"]
    callers = [
        await exec_python(
            [*argv, str(RACES), str(start_at)],
            dict(os.environ),
            tmp_path / f"caller-{n}.log",
            pipe_stdout=False,
        )
        for n in range(3)
    ]
    codes = [await p.wait() for p in callers]
    logs = [(tmp_path / f"caller-{n}.log").read_text() for n in range(3)]
    assert codes == [0, 0, 0], logs
    received = of_type(await engine.world.list_events(run_id), EventType.HOOK_RECEIVED)
    per_id = Counter(e.data["deliveryId"] for e in received)
    assert per_id == Counter({f"d-{i}": 1 for i in range(RACES)})


async def test_a_workers_stale_ack_is_a_logged_no_op(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from wayline._engine.messages import Verdict

    world = engine.world
    mid = await world.enqueue("flow", {"runId": "nobody"})
    [mine] = await world.receive("flow", wait_seconds=2)
    assert await world.retry(mine, 0)  # as if its hold had lapsed: another worker has it now
    [theirs] = await world.receive("flow", wait_seconds=2)
    worker = wayline.Worker(world, [])
    with caplog.at_level(logging.WARNING, logger="wayline.worker"):
        await worker._settle(mine, Verdict("ack"))
    assert any("was a no-op" in r.getMessage() for r in caplog.records)
    assert await world.ack(theirs) is True  # the message was still theirs to settle
    assert theirs.message_id == mid
