"""An abandoned unwind says what it gives up: the reversals the park left untried are
returned by the abandon, recorded in its event, shown by ``runs show``, and never run."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import wayline
from tests.runtime import saga_flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import abandoned_text, render_show

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"

UNTRIED = (
    wayline.Reversal("trip_charge_card:compensate", "trip_charge_card", "s2"),
    wayline.Reversal("trip_book_flight:compensate", "trip_book_flight", "s1"),
)


async def test_an_abandon_lists_the_reversals_it_leaves_untried_and_they_never_run(
    engine: Engine, tmp_path: Path
) -> None:
    """The seat's release fails for good; the card's refund and the flight's cancellation
    were still to run. The abandon skipped them and said nothing about it (a flight stayed
    booked): now it returns them, its event records them, and ``runs show`` prints them."""
    log = str(tmp_path / "log")
    (tmp_path / saga_flows.SEAT_DESK_OFFLINE).touch()
    client = engine.client

    async def stuck() -> bool:
        return await handle.status() is wayline.RunStatus.COMPENSATION_STUCK

    async with engine.worker([saga_flows.trip]):
        handle = await client.start(saga_flows.trip, log, "t1")
        await wait_for(stuck, timeout=20)
    # no worker runs now: the abandon is recorded, and asked twice gives the same answer
    first = await client.abandon_compensation(handle.run_id)
    assert first.recorded and first.not_run == UNTRIED
    again = await client.abandon_compensation(handle.run_id)  # nothing to do: same list
    assert not again.recorded and again.not_run == UNTRIED
    async with engine.worker([saga_flows.trip]):
        with pytest.raises(wayline.RunFailedError, match="compensation was abandoned"):
            await handle.result(timeout=20)

    events = await handle.events()
    (park,) = of_type(events, EventType.RUN_COMPENSATION_STUCK)
    (abandon,) = of_type(events, EventType.RUN_COMPENSATION_ABANDONED)
    recorded = [r.to_json() for r in UNTRIED]
    assert park.data["notRun"] == recorded
    assert abandon.data["notRun"] == recorded
    assert lines(log) == [
        "book flight t1",
        "charge card t1",
        "hold seat t1",
        "confirm t1",
        "try release seat t1",
    ]  # neither the refund nor the cancellation ran
    out = io.StringIO()
    info = await client.get_run(handle.run_id)
    render_show(info, events, out, "sqlite:////w.db")
    assert (
        "failed: FatalError: seat desk offline (FatalError is never retried); waiting to run: "
        "trip_charge_card:compensate (reverses s2), "
        "trip_book_flight:compensate (reverses s1)"
    ) in out.getvalue()
    assert (
        "compensation abandoned; not run: "
        "trip_charge_card:compensate (reverses s2), "
        "trip_book_flight:compensate (reverses s1)"
    ) in out.getvalue()
    assert abandoned_text(handle.run_id, UNTRIED).splitlines()[1:] == [
        "not run, and never will be (latest first):",
        "  trip_charge_card:compensate (reverses s2)",
        "  trip_book_flight:compensate (reverses s1)",
    ]


async def test_an_abandon_of_a_park_that_listed_nothing_still_ends_the_run(
    engine: Engine, tmp_path: Path
) -> None:
    """A run parked by an older worker has no list on its park: the abandon says it does not
    know (None), records no list, and the run ends as it did."""
    from wayline._core.events import NewEvent
    from wayline._core.ids import new_run_id

    world, run_id = engine.world, new_run_id()
    created = {"workflow": "trip", "input": {"args": [str(tmp_path / "log"), "t2"]}}
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=created)], expected_seq=0)
    await world.append(run_id, [NewEvent(EventType.RUN_STARTED)])
    why = {"reason": "failed", "error": {"name": "FatalError", "message": "no hotel"}}
    await world.append(run_id, [NewEvent(EventType.RUN_COMPENSATING, data=why)])
    stuck = {"step": "trip_hold_seat", "stepId": "trip_hold_seat#0", "error": {}}
    await world.append(run_id, [NewEvent(EventType.RUN_COMPENSATION_STUCK, data=stuck)])
    assert (await engine.client.abandon_compensation(run_id)).not_run is None
    events = await engine.client.handle(run_id).events()
    assert dict(of_type(events, EventType.RUN_COMPENSATION_ABANDONED)[0].data) == {}
    out = io.StringIO()
    render_show(await engine.client.get_run(run_id), events, out, "sqlite:////w.db")
    assert "compensation abandoned\n" in out.getvalue()
