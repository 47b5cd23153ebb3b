"""The SQLite world reads a page of a run's log (``events_page``, the console's ``/events``)
through the events table's primary key: the search starts at the cursor and stops at the
page's ``LIMIT``, with no scan of the run's other rows and no sort. Checked on the query plans
of the statements the world really runs."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.sqlite_plans import page_read_plan, traced
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.local import LocalWorld


async def test_a_page_of_the_log_is_read_through_the_primary_key(tmp_path: Path) -> None:
    db = tmp_path / "page-plans.db"
    async with LocalWorld(db) as world:
        run_id = new_run_id()
        data = {"workflow": "page-plans-wf", "input": []}
        await world.append(run_id, [NewEvent(T.RUN_CREATED, data=data)], expected_seq=0)
        await world.append(run_id, [NewEvent(T.WAIT_CREATED, f"w{n}") for n in range(20)])
        with traced(world) as statements:
            page = await world.events_page(run_id, 5, 4)
    assert [e.seq for e in page] == [6, 7, 8, 9]
    plan = page_read_plan(db, statements, "events")
    assert "SEARCH events USING PRIMARY KEY (run_id=? AND seq>?)" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
