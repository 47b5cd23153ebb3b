"""Bytes written by hand into the NATS queue's side stores and headers: the hand-back notes
(``h<seq>`` in the idem bucket) and the ``Wayline-Id`` header. A bad value fences only the
message it names, with a typed error or a sane reading, never a crash of the receive loop."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds
from tests.runtime.harness import wait_for
from wayline.worlds.nats.direct import direct_batch


@pytest.mark.parametrize("note", [b"x", b"\xff\xfe", b"1e9999", b"-5", b"99999999999"])
async def test_a_garbage_hand_back_note_does_not_break_receive(
    open_nats_world: OpenWorlds, note: bytes
) -> None:
    world = await open_nats_world(visibility_seconds=5)
    await world.enqueue("flow", {"runId": "wf_" + "0" * 32})
    [first] = await world.receive("flow", wait_seconds=2)
    seq = int(first.handle.msg.metadata.sequence.stream)
    assert await world.retry(first, 0)
    await world._queue._idem.put(f"h{seq}", note)  # behind the world's back
    # any error here would end the worker's receive loop (only WorldUnavailableError is
    # retried there), and the note stays: the message would never be delivered again
    [again] = await world.receive("flow", wait_seconds=2)
    assert again.message_id == first.message_id
    assert again.attempt >= 1, again.attempt  # an attempt is never below 1
    assert again.attempt <= 2, again.attempt  # a forged note never spends the budget
    assert await world.ack(again)


async def test_a_worker_keeps_consuming_after_the_queue_stream_is_deleted_and_recreated(
    open_nats_world: OpenWorlds,
) -> None:
    """Someone deletes the queue stream under a live worker; a world that starts later (a
    client, another worker) creates it again. The worker that was running resumes consuming:
    its receive loop does not end on the error it met meanwhile."""
    import wayline
    from tests.hostile import flows
    from tests.runtime.harness import settings

    world = await open_nats_world()
    client = wayline.Client(world)
    worker = wayline.Worker(world, [flows.chain_of], settings=settings())
    async with worker:
        assert await (await client.start(flows.chain_of, 2)).result(timeout=20) == 2
        await world._queue._js.delete_stream(world.names.queue_stream)
        await asyncio.sleep(1.5)  # the worker's receives meet the missing stream
        other = await open_nats_world()  # creates the stream again
        run = await wayline.Client(other).start(flows.chain_of, 3)
        assert await run.result(timeout=20) == 3
        assert worker.consuming()


@wayline.step
async def held(path: str) -> str:
    """Notes each body that starts, then waits for ``path + '.go'``."""
    with open(path, "a") as f:  # noqa: ASYNC230 - a tiny local marker file
        f.write("start\n")
    while not os.path.exists(path + ".go"):  # noqa: ASYNC110, ASYNC240 - a marker file
        await asyncio.sleep(0.05)
    return "done"


@wayline.workflow
async def holds(path: str) -> str:
    return await held(path)


async def test_a_forged_wayline_id_header_does_not_take_over_a_running_step(
    open_nats_world: OpenWorlds, tmp_path: Path
) -> None:
    """A flow message published by hand with ``Wayline-Id`` set to the id of the delivery
    that owns a running inline step must not pass for that delivery: the step's body runs
    once, not a second time beside the first ("owned recovery" is for the owner's own
    redelivery)."""
    from tests.runtime.harness import settings

    path = str(tmp_path / "marks")
    a, b = await open_nats_world(), await open_nats_world()
    async with wayline.Worker(a, [holds], settings=settings(), flow_concurrency=1):
        run = await wayline.Client(a).start(holds, path)
        await wait_for(_lines(path, 1), timeout=15)
        [started] = [e for e in await a.list_events(run.run_id) if e.type == "step_started"]
        owner = str(started.data["ownerMessageId"])
        # the owner's message, as stored: its subject and payload, copied by hand
        msgs, _ = await direct_batch(
            a._queue._nc,
            a.names.queue_stream,
            {"seq": int(owner), "batch": 1},
            timeout=5,
            url="",
        )
        [orig] = msgs
        subject = orig.subject.rsplit(".", 1)[0] + "." + uuid.uuid4().hex
        await a._queue._js.publish(subject, orig.data, headers={"Wayline-Id": owner})
        async with wayline.Worker(b, [holds], settings=settings()):
            await asyncio.sleep(3)  # B receives the forged message and acts on it
            body_runs = _count(path)
            with open(path + ".go", "w") as f:  # noqa: ASYNC230 - a tiny local marker file
                f.write("go")
            assert await run.result(timeout=20) == "done"
    assert body_runs == 1, f"the step's body started {body_runs} times"


def _count(path: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip() == "start")
    except FileNotFoundError:
        return 0


def _lines(path: str, n: int) -> Any:
    async def check() -> bool:
        return _count(path) >= n

    return check
