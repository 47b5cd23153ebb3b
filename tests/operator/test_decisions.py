"""The operator's reconcile applies the dispatch decision table to a live run's steps, on
every world: an owned step under an active lease gets its epoch-keyed backstop (a delayed flow
message), a lapsed one its step message (keyed by the step); applying it twice adds nothing."""

from __future__ import annotations

import time

from wayline._core.dispatch import backstop_key, step_dispatch_key
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.settings import Settings
from wayline.world import STEP_TOPIC, World
from wayline.world.routing import routed
from wayline_operator.decisions import apply_table


async def _run_with_step(
    world: World, owner: str | None, retried: bool = False, lease: float | None = None
) -> str:
    run_id = new_run_id()
    started: dict[str, object] = {"attempt": 1, "ownerMessageId": owner}
    if lease is not None:
        started["lease"] = lease
    events = [
        NewEvent(EventType.RUN_CREATED, data={"workflow": "w", "input": {"args": []}}),
        NewEvent(EventType.RUN_STARTED),
        NewEvent(EventType.STEP_CREATED, "s1", {"stepName": "charge", "input": None}),
        NewEvent(EventType.STEP_STARTED, "s1", started),
    ]
    if retried:
        events.append(NewEvent(EventType.STEP_RETRYING, "s1", {"error": {"message": "x"}}))
    await world.append(run_id, events)
    return run_id


async def test_an_owned_step_under_its_lease_gets_its_backstop(world: World) -> None:
    run_id = await _run_with_step(world, "msg-of-a-live-worker")
    events = await world.list_events(run_id)
    settings = Settings.from_env({})
    rows, said = await apply_table(world, run_id, events, now=time.time(), settings=settings)
    [row] = rows
    assert row["owner"] == "msg-of-a-live-worker" and row["backstopArmed"] is True
    assert 0 < row["leaseRemainingSeconds"] <= settings.lease_seconds
    assert row["attempt"] == 1 and row["name"] == "charge"
    [(key, notice)] = said
    assert key == backstop_key(run_id, "s1", events[-1].created_at)
    assert notice.reason == "BackstopArmed"
    woken = await world.runs_with_messages()
    assert woken is None or run_id in woken
    assert await world.receive(STEP_TOPIC, max_messages=1, wait_seconds=0.2) == []  # not the step


async def test_a_lapsed_or_expired_step_gets_its_step_message_once(world: World) -> None:
    lapsed = await _run_with_step(world, "msg-dead", retried=True)
    expired = await _run_with_step(world, "msg-long-gone")
    settings = Settings.from_env({})
    later = time.time() + settings.lease_seconds + 5  # the second owner's lease has run out
    for run_id in (lapsed, expired, lapsed):  # twice for one: the key holds it to one message
        events = await world.list_events(run_id)
        rows, _ = await apply_table(world, run_id, events, now=later, settings=settings)
        assert [(r["action"], r["backstopArmed"], r["leaseRemainingSeconds"]) for r in rows] == [
            ("enqueue", False, 0.0)
        ]
    # routed to workers of the run's workflow ("w"), as every step message is
    got = await world.receive(routed(STEP_TOPIC, "w"), max_messages=10, wait_seconds=1.0)
    assert sorted((d.payload or {})["runId"] for d in got) == sorted([lapsed, expired])
    for d in got:
        assert (d.payload or {})["stepId"] == "s1"
        await world.ack(d)
    assert step_dispatch_key(lapsed, "s1") != step_dispatch_key(expired, "s1")


async def test_an_owner_of_a_longer_lease_than_the_operators_keeps_its_step(world: World) -> None:
    """The owner recorded its own lease (a worker of a longer one than the operator's, say one
    of a version rolled out before): past the operator's lease but inside the owner's, the
    step is still its owner's. The operator arms a backstop for the owner's lease, and sends
    no step message, which a queued worker would run beside the owner."""
    settings = Settings.from_env({})
    owner_lease = settings.lease_seconds + 30  # within the 900 s cap
    run_id = await _run_with_step(world, "msg-of-a-slow-owner", lease=owner_lease)
    events = await world.list_events(run_id)
    later = time.time() + settings.lease_seconds + 5  # the operator's own lease has run out
    rows, _ = await apply_table(world, run_id, events, now=later, settings=settings)
    [row] = rows
    assert (row["action"], row["backstopArmed"]) == ("arm_backstop", True)
    assert 0 < row["leaseRemainingSeconds"] <= owner_lease - settings.lease_seconds
    assert await world.receive(routed(STEP_TOPIC, "w"), max_messages=1, wait_seconds=0.2) == []
