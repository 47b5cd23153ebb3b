"""The SQLite world's runs list under a search attribute filter reads indexes only until it
has its page: the runs a value names, their times and statuses come from covering indexes,
and only the page's own rows are read (the console's runs page among 100,000 runs,
bench/RESULTS.md). Checked on the query plans of the statements the world really runs."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.sqlite_plans import query_plan, traced
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.search_attributes import parse_all
from wayline.worlds.local import LocalWorld


def _plans(db: Path, statements: list[str]) -> list[str]:
    """The query plan of each traced statement that reads the attribute index."""
    return [
        query_plan(db, sql)
        for sql in statements
        if "run_attributes" in sql and sql.lstrip().upper().startswith("SELECT")
    ]


async def test_an_attribute_filter_reads_rows_for_its_page_only(tmp_path: Path) -> None:
    db = tmp_path / "plans.db"
    async with LocalWorld(db) as world:
        for i in range(6):
            data = {"workflow": "plans-wf", "input": [i], "search": {"tenant": f"t{i % 2}"}}
            await world.append(new_run_id(), [NewEvent(T.RUN_CREATED, data=data)], expected_seq=0)
        with traced(world) as statements:
            page = await world.runs_page(after=None, limit=2, where=parse_all("tenant=t1"))
            counts = await world.count_runs(where=parse_all("tenant=t1"))
    assert len(page) == 2
    assert counts == {RunStatus.PENDING: 3}
    plans = _plans(db, statements)
    assert len(plans) == 2, statements
    for plan in plans:
        assert "USING COVERING INDEX run_attributes_text_run" in plan, plan
        assert "USING COVERING INDEX runs_listed" in plan, plan
    # the page's rows (and their last sequences) are read past the LIMIT of the ids only
    assert plans[0].index("LIST SUBQUERY") < plans[0].index("CORRELATED SCALAR SUBQUERY"), plans[0]
