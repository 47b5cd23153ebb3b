"""The operator's start of a WorkflowRun's run (``Reconciler.start``) on a real SQLite world,
repeated as kopf repeats it: for a creation it sees again, and when the resource's status is
emptied (it then looks unstarted). The world's ``enqueue`` is wrapped to count what is sent;
every call still reaches the world."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings
from wayline.world import FLOW_TOPIC
from wayline.worlds.local import LocalWorld
from wayline_operator.reconcile import Reconciler


def _count_starts(world: LocalWorld, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    real = world.enqueue

    async def enqueue(topic: str, payload: Any, **kw: Any) -> Any:
        if topic == FLOW_TOPIC and payload.get("reason") == "start":
            sent.append(payload["runId"])
        return await real(topic, payload, **kw)

    monkeypatch.setattr(world, "enqueue", enqueue)
    return sent


async def test_starting_a_run_that_ended_again_sends_nothing(
    world: LocalWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WorkflowRun whose status was emptied after its run ended is started again by kopf:
    it starts nothing, and it re-sent that ended run's start message each time."""
    reconciler, uid = Reconciler(world), str(uuid.uuid4())
    spec = {"workflow": "chain", "input": 3}
    sent = _count_starts(world, monkeypatch)
    run_id = await reconciler.start(uid, spec, "ns")
    async with wayline.Worker(world, [flows.chain], settings=settings()):
        assert await reconciler.client.handle(run_id).result(timeout=10) == 3
    assert sent == [run_id]
    assert await reconciler.start(uid, spec, "ns") == run_id
    assert sent == [run_id]  # nothing for a run that has ended
    assert len(await world.list_runs()) == 1


async def test_starting_a_live_run_again_sends_its_start_again(
    world: LocalWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that has not ended may have lost its start (a crash between the write of
    ``run_created`` and the message): a repeated start sends it again (the queue dedups)."""
    reconciler, uid = Reconciler(world), str(uuid.uuid4())
    spec = {"workflow": "kid_waits", "input": "tok-s"}
    sent = _count_starts(world, monkeypatch)
    run_id = await reconciler.start(uid, spec, "ns")
    assert await reconciler.start(uid, spec, "ns") == run_id
    assert sent == [run_id, run_id]
    info = await world.get_run(run_id)
    assert info is not None and info.attributes["namespace"] == "ns"
