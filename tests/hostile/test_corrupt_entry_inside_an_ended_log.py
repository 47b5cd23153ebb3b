"""``Client.get_run`` raises ``CORRUPT_LOG`` for an entry that does not read anywhere in a
run's log, as docs/hostile-input.md says, on both worlds: on SQLite the run's row kept the
status of a run that ended, and the client read only that row."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import wayline
from tests.hostile.poison import _nc, is_local
from tests.runtime import client_flows
from tests.runtime.harness import Engine
from wayline.errors import CorruptLogError
from wayline.world import World

GARBAGE = b"\xff not json"


async def _damage_inside(world: World, run_id: str, seq: int, tmp_path: Path) -> int:
    """Make entry ``seq`` of an ended run unreadable, with readable entries after it; returns
    the number of the entry that fails (the row's seq on SQLite, the stream sequence on NATS)."""
    if is_local(world):
        db = sqlite3.connect(tmp_path / "wayline.db")
        with db:
            db.execute(
                "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?", (GARBAGE, run_id, seq)
            )
        db.close()
        return seq
    # a NATS stream is append-only: garbage, then a copy of the run's last message (its end
    # and summary) after it, so the summary a reader meets last still says "completed"
    nc = await _nc(world)
    try:
        js = nc.jetstream()
        names = world.names  # type: ignore[attr-defined]
        last = await js.get_last_msg(names.events_stream, names.run_subject(run_id))
        bad = await js.publish(names.run_subject(run_id), GARBAGE)
        headers = {k: v for k, v in (last.headers or {}).items() if not k.startswith("Nats-")}
        await js.publish(names.run_subject(run_id), last.data, headers=headers)
        return int(bad.seq)
    finally:
        await nc.close()


async def test_get_run_raises_for_an_unreadable_entry_inside_an_ended_log(
    engine: Engine, tmp_path: Path
) -> None:
    async with engine.worker([client_flows.takes_list]):
        handle = await engine.client.start(client_flows.takes_list, ["a", "b"])
        assert await handle.result(timeout=10) == 2
    events = await engine.world.list_events(handle.run_id)
    assert len(events) > 2
    bad = await _damage_inside(engine.world, handle.run_id, 2, tmp_path)

    reader = await engine.make_world()  # a fresh process's view, nothing cached
    client = wayline.Client(reader)
    with pytest.raises(CorruptLogError) as fenced:
        await client.get_run(handle.run_id)
    assert (fenced.value.run_id, fenced.value.seq) == (handle.run_id, bad)
    with pytest.raises(CorruptLogError):
        await client.handle(handle.run_id).status()
