"""Runs whose steps are written straight to the log, as a worker would write them, so a test
of how the console shows many steps need not wait for a worker to run them."""

from __future__ import annotations

from wayline import Client
from wayline._core.events import EventType, NewEvent
from wayline.world import World

Step = tuple[str, str]
"""A step's correlation id and how it stands: ``completed``, ``failed`` or ``running``."""


async def unserved_run(client: Client, workflow: str) -> str:
    """A run of ``workflow``, which no worker serves: it stays running, its log the test's."""
    handle = await client.start(workflow)
    await client.world.append(handle.run_id, [NewEvent(EventType.RUN_STARTED)])
    return handle.run_id


def step_events(cid: str, name: str, occurrence: int, status: str) -> list[NewEvent]:
    """A step's events up to ``status``: created and started, then completed or failed."""
    events = [
        NewEvent(EventType.STEP_CREATED, cid, {"stepName": name, "occurrence": occurrence}),
        NewEvent(EventType.STEP_STARTED, cid, {"attempt": 1}),
    ]
    if status == "completed":
        events.append(NewEvent(EventType.STEP_COMPLETED, cid, {"result": cid}))
    elif status == "failed":
        error = {"type": "ValueError", "message": f"{cid} refused"}
        events.append(NewEvent(EventType.STEP_FAILED, cid, {"error": error}))
    return events


async def append_steps(world: World, run_id: str, steps: list[tuple[str, str, int, str]]) -> None:
    """Append ``(cid, name, occurrence, status)`` steps to the run's log in one write."""
    batch: list[NewEvent] = []
    for cid, name, occurrence, status in steps:
        batch += step_events(cid, name, occurrence, status)
    await world.append(run_id, batch)
