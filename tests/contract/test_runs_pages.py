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


def _created(workflow: str, i: int) -> list[NewEvent]:
    data = {"workflow": workflow, "input": [i], "search": {"parity": f"p{i % 2}"}}
    return [NewEvent(T.RUN_CREATED, data=data)]


async def _complete(world: World, run_id: str) -> None:
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": 0})], expected_seq=1)


async def test_a_cursor_walks_on_while_runs_are_created_and_change_status(world: World) -> None:
    made = []
    for i in range(6):
        made.append(new_run_id())
        await world.append(made[-1], _created("pages-live-wf", i), expected_seq=0)
    newest_first = [r.run_id for r in await world.list_runs(workflow="pages-live-wf")]
    assert sorted(newest_first) == sorted(made)
    first = await world.runs_page(after=None, limit=3, workflow="pages-live-wf")
    assert [r.run_id for r in first] == newest_first[:3]
    # Meanwhile: two newer runs (before the cursor: not on the next pages), one run shown
    # already and one not shown yet complete.
    for i in range(2):
        await world.append(new_run_id(), _created("pages-live-wf", 10 + i), expected_seq=0)
    await _complete(world, newest_first[0])
    await _complete(world, newest_first[4])
    after = (first[-1].created_at, first[-1].run_id)
    rest = await world.runs_page(after=after, limit=10, workflow="pages-live-wf")
    assert [r.run_id for r in rest] == newest_first[3:]
    assert [r.status for r in rest] == [RunStatus.PENDING, RunStatus.COMPLETED, RunStatus.PENDING]
    pending = await world.runs_page(
        after=after, limit=10, status=RunStatus.PENDING, workflow="pages-live-wf"
    )
    assert [r.run_id for r in pending] == [newest_first[3], newest_first[5]]
    assert await world.count_runs(workflow="pages-live-wf") == {
        RunStatus.PENDING: 6,
        RunStatus.COMPLETED: 2,
    }


async def test_status_workflow_and_attribute_filters_hold_together(world: World) -> None:
    made: dict[str, list[str]] = {"pages-mix-a": [], "pages-mix-b": []}
    for i in range(8):
        for workflow, ids in made.items():
            ids.append(new_run_id())
            await world.append(ids[-1], _created(workflow, i), expected_seq=0)
            if i % 4 < 2:
                await _complete(world, ids[-1])
    # in pages-mix-a: i in {0, 1, 4, 5} completed, even i has parity p0
    want = {made["pages-mix-a"][i] for i in (0, 4)}
    even = parse_all("parity=p0")
    page = await world.runs_page(
        after=None, limit=10, status=RunStatus.COMPLETED, workflow="pages-mix-a", where=even
    )
    assert {r.run_id for r in page} == want
    assert [r.run_id for r in page] == [
        r.run_id
        for r in await world.list_runs(
            status=RunStatus.COMPLETED, workflow="pages-mix-a", where=even
        )
    ]
    assert await world.count_runs(workflow="pages-mix-a", where=even) == {
        RunStatus.COMPLETED: 2,
        RunStatus.PENDING: 2,
    }
    assert await world.count_runs(workflow="pages-mix-b") == {
        RunStatus.COMPLETED: 4,
        RunStatus.PENDING: 4,
    }
    by_status = await world.runs_page(
        after=None, limit=10, status=RunStatus.PENDING, workflow="pages-mix-b"
    )
    assert {r.run_id for r in by_status} == {made["pages-mix-b"][i] for i in (2, 3, 6, 7)}


async def _followed(world: World) -> None:
    """Ask the world to keep its runs in memory, and wait for it where it tells when it has
    (NATS: ``runs_followed``), so the answers below are the kept ones."""
    await world.follow_runs()
    ready = getattr(world, "runs_followed", None)
    if ready is not None:
        assert await ready(30.0) is not None


async def test_a_world_that_follows_its_runs_answers_as_one_that_does_not(world: World) -> None:
    made = []
    for i in range(5):
        made.append(new_run_id())
        await world.append(made[-1], _created("pages-follow-wf", i), expected_seq=0)
    await _complete(world, made[0])
    await _followed(world)
    # after the load: a new run, a status moved, a run deleted
    made.append(new_run_id())
    await world.append(made[-1], _created("pages-follow-wf", 5), expected_seq=0)
    await _complete(world, made[1])
    await world.append(made[2], [NewEvent(T.RUN_FAILED, data={"error": {}})], expected_seq=1)
    assert await world.delete_runs(older_than=0.0, statuses=[RunStatus.FAILED]) >= 1
    listed = await world.list_runs(workflow="pages-follow-wf")
    assert len(listed) == 5
    pages = await _walk(world, 2, workflow="pages-follow-wf")
    assert [r for p in pages for r in p] == [r.run_id for r in listed]
    completed = await _walk(world, 10, status=RunStatus.COMPLETED, workflow="pages-follow-wf")
    assert completed == [[r.run_id for r in listed if r.status is RunStatus.COMPLETED]]
    assert await world.count_runs(workflow="pages-follow-wf") == {
        RunStatus.COMPLETED: 2,
        RunStatus.PENDING: 3,
    }


async def test_a_followed_cursor_walks_on_while_statuses_move_back(world: World) -> None:
    """With the runs followed: a walk by pages of two under a status filter and a workflow
    filter, while a run between the pages is paused and goes back to pending, one shown
    starts and a newer run is created, shows each run that keeps the status once and no run
    twice, and the counts and a search attribute's page agree with the runs' logs, on every
    world."""
    workflow = "pages-back-wf"
    made = []
    for i in range(6):
        made.append(new_run_id())
        await world.append(made[-1], _created(workflow, i), expected_seq=0)
    await _followed(world)
    newest_first = [r.run_id for r in await world.list_runs(workflow=workflow)]
    first = await world.runs_page(after=None, limit=2, status=RunStatus.PENDING, workflow=workflow)
    assert [r.run_id for r in first] == newest_first[:2]
    # a run not shown yet is paused, then goes back to pending; one shown starts; a newer
    # run comes
    moving = newest_first[3]
    pause = NewEvent(T.RUN_PAUSED, data={"statusBefore": "pending"})
    await world.append(moving, [pause], expected_seq=1)
    await world.append(newest_first[0], [NewEvent(T.RUN_STARTED)], expected_seq=1)
    await world.append(new_run_id(), _created(workflow, 10), expected_seq=0)
    paused = await world.runs_page(after=None, limit=5, status=RunStatus.PAUSED, workflow=workflow)
    assert [r.run_id for r in paused] == [moving]
    unpause = NewEvent(T.RUN_UNPAUSED, data={"status": "pending"})
    await world.append(moving, [unpause], expected_seq=2)
    seen = [r.run_id for r in first]
    after = (first[-1].created_at, first[-1].run_id)
    while True:
        page = await world.runs_page(
            after=after, limit=2, status=RunStatus.PENDING, workflow=workflow
        )
        if not page:
            break
        seen += [r.run_id for r in page]
        after = (page[-1].created_at, page[-1].run_id)
    assert seen == newest_first  # the unpaused run back under pending, in its place
    assert await world.count_runs(workflow=workflow) == {
        RunStatus.PENDING: 6,
        RunStatus.RUNNING: 1,
    }
    even = parse_all("parity=p0")
    by_attribute = await world.runs_page(
        after=None, limit=10, status=RunStatus.PENDING, workflow=workflow, where=even
    )
    listed = await world.list_runs(status=RunStatus.PENDING, workflow=workflow, where=even)
    assert [r.run_id for r in by_attribute] == [r.run_id for r in listed]


async def test_counts_are_not_marked_partial_once_the_runs_are_followed(world: World) -> None:
    """``runs_loading`` (the console's ``countsPartial``) is False on a world that follows
    nothing, and once a world that follows its runs has loaded them; the counts are then
    exact (tests/nats/test_runs_first_pages.py has it True while NATS loads)."""
    assert world.runs_loading() is False
    run_id = new_run_id()
    await world.append(run_id, _created("pages-loading-wf", 0), expected_seq=0)
    await _followed(world)
    assert world.runs_loading() is False
    assert await world.count_runs(workflow="pages-loading-wf") == {RunStatus.PENDING: 1}
