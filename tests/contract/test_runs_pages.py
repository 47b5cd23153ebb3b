"""World contract: the runs list a page at a time from a cursor (``runs_page``), and the
counts by status over every run (``count_runs``), as the console's runs page reads them. Runs
unchanged on every world."""

from __future__ import annotations

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline._core.search_attributes import parse_all
from wayline.world import World


async def _fill(world: World, count: int) -> list[str]:
    """``count`` runs of ``pages-wf`` (every third completed, each with an even or odd
    ``parity``), and one of another workflow; the ids of the first, newest first."""
    made = []
    for i in range(count):
        run_id = new_run_id()
        data = {"workflow": "pages-wf", "input": [i], "search": {"parity": f"p{i % 2}"}}
        events = [NewEvent(T.RUN_CREATED, data=data)]
        if i % 3 == 0:
            events.append(NewEvent(T.RUN_COMPLETED, data={"output": i}))
        await world.append(run_id, events, expected_seq=0)
        made.append(run_id)
    other = [NewEvent(T.RUN_CREATED, data={"workflow": "pages-other", "input": []})]
    await world.append(new_run_id(), other, expected_seq=0)
    listed = await world.list_runs(workflow="pages-wf", limit=count)
    assert sorted(r.run_id for r in listed) == sorted(made)
    return [r.run_id for r in listed]


async def _walk(world: World, size: int, **filters: object) -> list[list[str]]:
    pages: list[list[str]] = []
    after: tuple[float, str] | None = None
    while True:
        page = await world.runs_page(after=after, limit=size, **filters)  # type: ignore[arg-type]
        if not page:
            return pages
        pages.append([r.run_id for r in page])
        after = (page[-1].created_at, page[-1].run_id)


async def test_pages_from_a_cursor_follow_the_list_each_run_once(world: World) -> None:
    newest_first = await _fill(world, 11)
    pages = await _walk(world, 4, workflow="pages-wf")
    assert [len(p) for p in pages] == [4, 4, 3]
    assert [r for p in pages for r in p] == newest_first
    completed = await world.list_runs(status=RunStatus.COMPLETED, workflow="pages-wf")
    by_status = await _walk(world, 2, status=RunStatus.COMPLETED, workflow="pages-wf")
    assert [r for p in by_status for r in p] == [r.run_id for r in completed]
    even = parse_all("parity=p0")
    listed = await world.list_runs(workflow="pages-wf", where=even)
    by_attribute = await _walk(world, 3, workflow="pages-wf", where=even)
    assert [r for p in by_attribute for r in p] == [r.run_id for r in listed]
    assert len(listed) == 6


async def test_counts_by_status_cover_every_run(world: World) -> None:
    await _fill(world, 7)
    assert await world.count_runs(workflow="pages-wf") == {
        RunStatus.COMPLETED: 3,
        RunStatus.PENDING: 4,
    }
    assert await world.count_runs() == {RunStatus.COMPLETED: 3, RunStatus.PENDING: 5}
    assert await world.count_runs(where=parse_all("parity=p1")) == {
        RunStatus.COMPLETED: 1,
        RunStatus.PENDING: 2,
    }
    assert await world.count_runs(workflow="pages-nobody") == {}
