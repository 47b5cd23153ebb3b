"""World contract: ``ready_messages`` counts a topic's messages that are due and not held, the
backlog the operator scales a WorkflowWorker's version on."""

from __future__ import annotations

from wayline.world import World


async def test_ready_messages_counts_due_unheld_messages_by_topic(world: World) -> None:
    for n in range(3):
        await world.enqueue("flow:w:ready-count@a", {"n": n})
    await world.enqueue("flow:w:ready-count@b", {"n": 9})
    await world.enqueue("flow:w:ready-count@a", {"n": 5}, delay_seconds=60)
    counts = await world.ready_messages(["flow:w:ready-count@a", "flow:w:ready-count@b", "none"])
    assert counts == {"flow:w:ready-count@a": 3, "flow:w:ready-count@b": 1, "none": 0}
    [held] = await world.receive("flow:w:ready-count@a", wait_seconds=2)
    counts = await world.ready_messages(["flow:w:ready-count@a"])
    assert counts == {"flow:w:ready-count@a": 2}  # the held one is a worker's, not backlog
    await world.ack(held)
    assert await world.ready_messages([]) == {}
