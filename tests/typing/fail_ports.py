"""A caller typed with one port of the world can use only that port: the narrow type is what
keeps ``_engine.step_slots`` from reaching for the log or the queue."""

from __future__ import annotations

from wayline.world.ports import EventLog, Retention, Slots, WorkQueue


async def takes_slots(slots: Slots) -> None:
    await slots.acquire_slot("key", "holder", 1)
    await slots.append("run", [])  # E: "Slots" has no attribute "append"


async def takes_queue(queue: WorkQueue) -> None:
    await queue.receive("flow")
    await queue.acquire_slot("key", "holder", 1)  # E: "WorkQueue" has no attribute "acquire_slot"


async def takes_retention(retention: Retention) -> None:
    await retention.archived_count()
    await retention.enqueue("flow", {})  # E: "Retention" has no attribute "enqueue"


async def takes_log(log: EventLog) -> None:
    await log.list_events("run")
    await log.delete_runs(older_than=0)  # E: "EventLog" has no attribute "delete_runs"
