"""The memory world keeps its messages by topic as well (``MemoryStore.topics``), so that a
receive reads its own topic's and not every message of the store: the index must hold
exactly the store's messages through enqueues, acks, dead letters and dropped runs."""

from __future__ import annotations

import asyncio

from wayline.worlds.memory import MemoryStore, MemoryWorld


def _indexed(store: MemoryStore) -> dict[int, str]:
    return {mid: m.topic for by_id in store.topics.values() for mid, m in by_id.items()}


def test_the_topic_index_holds_exactly_the_stored_messages() -> None:
    async def main() -> None:
        store = MemoryStore()
        world = MemoryWorld(store)
        for i in range(3):
            await world.enqueue("flow", {"runId": f"topic-index-run-{i}"})
            await world.enqueue("step", {"runId": f"topic-index-run-{i}", "stepId": "s"})
        await world.enqueue("flow", {"runId": "topic-index-run-0"}, delay_seconds=3600.0)
        assert _indexed(store) == {mid: m.topic for mid, m in store.messages.items()}
        flows = await world.receive("flow", max_messages=2, wait_seconds=0.0)
        steps = await world.receive("step", max_messages=1, wait_seconds=0.0)
        assert [d.payload for d in flows] == [
            {"runId": "topic-index-run-0"},
            {"runId": "topic-index-run-1"},
        ]
        assert await world.ack(flows[0])
        assert await world.dead_letter(steps[0], "topic index test")
        store.drop_runs(["topic-index-run-2"])
        assert _indexed(store) == {mid: m.topic for mid, m in store.messages.items()}
        assert sorted(_indexed(store).values()) == ["flow", "flow", "step"]
        assert await world.ready_messages(["flow", "step", "none"]) == {
            "flow": 0,
            "step": 1,
            "none": 0,
        }
        assert await world.in_flight_messages(["flow"]) == {"flow": 1}
        assert await world.delayed_messages(["flow"], store.now() + 7200.0) == {"flow": 1}

    asyncio.run(main())
