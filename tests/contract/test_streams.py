"""World contract, the step-stream port. A record is any JSON object ``write_stream`` stored: both
worlds read back the same records at the same indexes, whatever keys they carry (what a
record says is the SDK reader's to check)."""

from __future__ import annotations

from wayline._core.ids import new_run_id
from wayline.world import World


async def test_every_stored_record_is_read_back_at_its_index(world: World) -> None:
    run_id = new_run_id()
    records = [{"kind": "data", "data": 1}, {"other": True}, {"kind": "close", "step": "s1"}]
    await world.write_stream(run_id, "s", records)
    assert await world.read_stream(run_id, "s", 0, 10) == records
    assert await world.read_stream(run_id, "s", 1, 1) == [{"other": True}]
    assert await world.read_stream(run_id, "other", 0, 10) == []
