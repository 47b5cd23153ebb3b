"""World contract, the work-queue port: ``enqueue`` stores the payload it is given, the
ordering fields (``_core.ordering``) included, on every world. The run's ordering is put on a
message above the seam, by whoever sends (``wayline.world.sending.send``), never by the world:
a world that added the context's ordering itself would store fields its sender left out."""

from __future__ import annotations

from wayline._core import ordering
from wayline.world import World
from wayline.world.sending import send

ACME = ordering.Ordering(priority=2, fairness_key="acme", fairness_weight=3)


async def test_a_payloads_ordering_fields_are_stored_as_given(world: World) -> None:
    given = {"runId": "r1", "_priority": 4, "_fairnessKey": "beta", "_fairnessWeight": 2}
    with ordering.attached(ACME):  # another ordering in the context changes nothing
        await world.enqueue("flow", given)
    [delivery] = await world.receive("flow", wait_seconds=2)
    await world.ack(delivery)
    assert delivery.payload == given


async def test_the_world_adds_no_ordering_of_its_own(world: World) -> None:
    with ordering.attached(ACME):
        await world.enqueue("flow", {"runId": "r2"})
    [delivery] = await world.receive("flow", wait_seconds=2)
    await world.ack(delivery)
    assert delivery.payload == {"runId": "r2"}


async def test_a_sender_puts_the_contexts_ordering_on_a_payload_without_one(
    world: World,
) -> None:
    with ordering.attached(ACME):
        await send(world, "flow", {"runId": "r3"})
        await send(world, "flow", {"runId": "r4", "_priority": 1})
    got = []
    for _ in range(2):
        [delivery] = await world.receive("flow", wait_seconds=2)
        await world.ack(delivery)
        got.append(delivery.payload or {})
    by_run = {str(p["runId"]): p for p in got}
    assert ordering.of_payload(by_run["r3"]) == ACME
    assert by_run["r4"] == {"runId": "r4", "_priority": 1}  # its own field kept, none added
