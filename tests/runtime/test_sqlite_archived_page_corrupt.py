"""A ``runs_archive`` row is read as untrusted by a page of the archived run's log
(``archived_page``, the console's ``/events``) as by ``archived_run``: a last seq that is not
one Wayline writes is ``CorruptLogError`` (``409 CORRUPT_LOG``), never a ``ValueError`` or a
``TypeError`` (a 500)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.archived_runs import long_archived_run
from wayline.errors import CorruptLogError
from wayline.worlds.local import LocalWorld


@pytest.mark.parametrize("last_seq", ["many", None, 2.5])
async def test_an_archived_runs_unreadable_last_seq_is_a_corrupt_log(
    tmp_path: Path, last_seq: object
) -> None:
    db = tmp_path / "archived-corrupt.db"
    async with LocalWorld(db) as world:
        run_id = await long_archived_run(world, 20, "archived-corrupt")
    writer = sqlite3.connect(db)
    try:
        writer.execute("UPDATE runs_archive SET last_seq = ? WHERE run_id = ?", (last_seq, run_id))
        writer.commit()
    finally:
        writer.close()
    async with LocalWorld(db) as world:
        with pytest.raises(CorruptLogError):
            await world.archived_run(run_id)
        with pytest.raises(CorruptLogError):
            await world.archived_page(run_id, 0, 10)
