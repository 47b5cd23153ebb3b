"""World contract, the registry port: a worker's heartbeat is merged into the entry of each
definition it serves, by key, and workers of one definition share that entry; a withdrawal
takes the worker out of it, and nothing is ever removed."""

from __future__ import annotations

from wayline.world import World


def _entry(worker: str, live_until: float, **more: object) -> dict[str, object]:
    return {
        "key": "contract-registry:1",
        "workflow": "contract-registry",
        "worker": worker,
        "seenAt": live_until - 30,
        "liveUntil": live_until,
        **more,
    }


async def test_heartbeats_of_one_definition_merge_into_one_entry(world: World) -> None:
    now = world.now()
    await world.record_served([_entry("w1", now + 30)])
    await world.record_served([_entry("w2", now + 60)])
    [entry] = [e for e in await world.list_served() if e["key"] == "contract-registry:1"]
    assert set(entry["workers"]) == {"w1", "w2"}
    assert (entry["worker"], entry["liveUntil"]) == ("w2", now + 60)


async def test_a_withdrawal_leaves_the_entry_with_its_other_workers(world: World) -> None:
    now = world.now()
    await world.record_served([_entry("w1", now + 30)])
    await world.record_served([_entry("w2", now + 60)])
    await world.record_served([_entry("w2", now, withdrawn=True)])
    [entry] = [e for e in await world.list_served() if e["key"] == "contract-registry:1"]
    assert set(entry["workers"]) == {"w1"}
    assert (entry["worker"], entry["liveUntil"]) == ("w1", now + 30)
    await world.record_served([_entry("w1", now, withdrawn=True)])
    [gone] = [e for e in await world.list_served() if e["key"] == "contract-registry:1"]
    assert gone["workers"] == {} and gone["liveUntil"] <= world.now()


async def test_a_withdrawal_of_what_was_never_recorded_writes_nothing(world: World) -> None:
    await world.record_served([_entry("w9", world.now(), withdrawn=True)])
    assert [e for e in await world.list_served() if e["key"] == "contract-registry:1"] == []


async def test_each_live_worker_says_how_many_deliveries_it_holds(world: World) -> None:
    """A heartbeat's ``held`` is kept per worker; a worker whose heartbeat has no count (one of
    an earlier release) reads as unknown, not as idle, and a lapsed worker is not listed."""
    now = world.now()
    await world.record_served([_entry("cr-busy", now + 30, held=3)])
    await world.record_served([_entry("cr-idle", now + 30, held=0)])
    await world.record_served([_entry("cr-old", now + 30)])
    await world.record_served([_entry("cr-gone", now - 1, held=5)])
    held = await world.held_deliveries(world.now())
    assert {w: held.get(w, "absent") for w in ("cr-busy", "cr-idle", "cr-old", "cr-gone")} == {
        "cr-busy": 3,
        "cr-idle": 0,
        "cr-old": None,
        "cr-gone": "absent",
    }
    # The next heartbeat says the count of now; one without the field makes it unknown again.
    await world.record_served([_entry("cr-busy", now + 30, held=1)])
    await world.record_served([_entry("cr-idle", now + 30)])
    held = await world.held_deliveries(world.now())
    assert (held["cr-busy"], held["cr-idle"]) == (1, None)
