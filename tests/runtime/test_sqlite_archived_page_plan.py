"""The SQLite world reads a page of an archived run's log (``archived_page``, the console's
``/events`` of an archived run) through the ``events_archive_by_run`` index: the search starts
at the cursor and stops at the page's ``LIMIT``, with no scan of the archive's other rows and
no sort (issue #37). An archive file written before the index gets it when a world opens it.
Checked on the query plans of the statements the world really runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.archived_runs import long_archived_run
from tests.runtime.sqlite_plans import page_read_plan, traced
from wayline.worlds.local import LocalWorld


async def test_an_archived_page_is_read_through_the_archives_index(tmp_path: Path) -> None:
    db = tmp_path / "archived-plans.db"
    async with LocalWorld(db) as world:
        run_id = await long_archived_run(world, 20, "archived-plans")
    # an archive file as the version before the index wrote it: the same rows, no index
    writer = sqlite3.connect(db)
    try:
        writer.execute("DROP INDEX events_archive_by_run")
        writer.execute("DROP INDEX runs_archive_by_run")
        writer.commit()
    finally:
        writer.close()
    async with LocalWorld(db) as world:
        with traced(world) as statements:
            found = await world.archived_page(run_id, 5, 4)
    assert found is not None and [e.seq for e in found[1]] == [6, 7, 8, 9] and found[0] == 23
    plan = page_read_plan(db, statements, "events_archive")
    assert "SEARCH events_archive USING INDEX events_archive_by_run (run_id=? AND seq>?)" in plan, (
        plan
    )
    assert "TEMP B-TREE" not in plan, plan
