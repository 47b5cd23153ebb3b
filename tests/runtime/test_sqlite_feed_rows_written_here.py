"""The SQLite world tells its follower of run ends (``feed.Ends``) the change feed's rows it
wrote, so that follower keeps its quick pace for other processes' rows only (the pace itself:
``tests/unit/test_terminal_hints.py``). SQLite only: the feed is the embedded world's own."""

from __future__ import annotations

from pathlib import Path

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.local import LocalWorld


async def test_the_world_tells_its_follower_of_ends_the_rows_it_wrote(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db") as world:
        run_id = new_run_id()
        created = NewEvent(T.RUN_CREATED, data={"workflow": "w", "input": {"args": []}})
        await world.append(run_id, [created])
        assert world._db is not None
        [(gseq,)] = world._db.execute(
            "SELECT gseq FROM run_feed WHERE run_id = ?", (run_id,)
        ).fetchall()
        assert gseq in world._ends._own
