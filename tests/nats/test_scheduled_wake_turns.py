"""A receive of the NATS world on a topic whose recorded levels (priorities, fair lanes) hold
nothing ready while a schedule of one of them is pending asks again in short turns: the
schedule's firing stores its message without a publish the topic's subscription hears, so a
wait until the next rescan found a durable sleep's wake, a retry's delay or a delayed start
up to a rescan period late. The rescan is put far away (30 s) and the waits between the
receive's turns are counted, not timed: none may outlast a turn (``queue._POLL_SECONDS``)
while the schedule is pending."""

from __future__ import annotations

import pytest

from tests.nats_fixtures import OpenWorlds, count_level_waits
from wayline._core import ordering
from wayline.worlds.nats import queue as nats_queue


@pytest.mark.parametrize(
    "orderings",
    [
        pytest.param((ordering.Ordering(priority=0), ordering.Ordering(priority=7)), id="levels"),
        pytest.param(
            (ordering.Ordering(fairness_key="a"), ordering.Ordering(fairness_key="b")),
            id="lanes",
        ),
    ],
)
async def test_a_schedule_firing_onto_a_recorded_level_is_received_before_the_rescan(
    open_nats_world: OpenWorlds,
    monkeypatch: pytest.MonkeyPatch,
    orderings: tuple[ordering.Ordering, ordering.Ordering],
) -> None:
    monkeypatch.setattr(nats_queue, "RESCAN_SECONDS", 30.0)
    world = await open_nats_world()
    topic = f"sched-turns-{orderings[0].priority}-{orderings[0].fairness_key or 'p'}"
    for i, order in enumerate(orderings):
        await world.enqueue(topic, {"name": f"later-{i}", **order.fields()}, delay_seconds=0.3)
    waits = count_level_waits(monkeypatch)
    got = await world.receive(topic, max_messages=1, wait_seconds=6.0)
    assert waits and max(waits) <= nats_queue._POLL_SECONDS, waits
    assert [(d.payload or {}).get("name", "")[:6] for d in got] == ["later-"]
    for delivery in got:
        assert await world.ack(delivery)
