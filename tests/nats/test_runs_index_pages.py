"""The runs page and the counts by status on NATS read only what they show: a page reads the
names of its own runs (and those newer than its cursor), the counts read no name at all, and a
walk by cursors, from the process that gave the cursors out or from another one, shows every
run once in the runs' order. A world whose index was written in the first layout
(``<prefix>.ri.<status>.<workflow>.<created>.<run>``) is rebuilt on the first read."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.world import RunInfo
from wayline.worlds.nats import runs_index, runs_pages

_WFS = ("pages-index-a", "pages-index-b")


async def _fill(world: Any, count: int) -> dict[str, tuple[str, RunStatus]]:
    """``count`` runs over two workflows, one in three completed."""
    made: dict[str, tuple[str, RunStatus]] = {}

    async def one(i: int) -> None:
        run_id, workflow = new_run_id(), _WFS[i % 2]
        created = NewEvent(EventType.RUN_CREATED, data={"workflow": workflow, "input": []})
        await world.append(run_id, [created], expected_seq=0)
        status = RunStatus.PENDING
        if i % 3 == 0:
            done = NewEvent(EventType.RUN_COMPLETED, data={"output": 1})
            await world.append(run_id, [done], expected_seq=1)
            status = RunStatus.COMPLETED
        made[run_id] = (workflow, status)

    for start in range(0, count, 50):
        await asyncio.gather(*(one(i) for i in range(start, min(count, start + 50))))
    assert await world.flush_runs_index()
    return made


def _names_read(monkeypatch: Any) -> list[int]:
    """The number of subject names each stream-info answer of the runs index carried."""
    read: list[int] = []
    info = runs_index.RunsIndex._info

    async def counted(self: Any, stream: str, request: dict[str, Any]) -> dict[str, Any]:
        answer = await info(self, stream, request)
        if stream == self.stream:
            read.append(len((answer.get("state") or {}).get("subjects") or {}))
        return answer

    monkeypatch.setattr(runs_index.RunsIndex, "_info", counted)
    return read


async def test_a_page_and_the_counts_read_only_the_names_they_show(
    open_nats_world: OpenWorlds, monkeypatch: Any
) -> None:
    world = await open_nats_world()
    made = await _fill(world, 300)
    await world.runs_page(after=None, limit=10)  # the index and the log agree: no reconciling
    read = _names_read(monkeypatch)
    first = await world.runs_page(after=None, limit=10)
    second = await world.runs_page(after=(first[-1].created_at, first[-1].run_id), limit=10)
    failed = await world.runs_page(after=None, limit=10, status=RunStatus.COMPLETED)
    counts = await world.count_runs()
    assert len(first) == len(second) == len(failed) == 10
    assert sum(read) <= 10 + 20 + 10, read  # every page's names and the newer ones: no more
    done = sum(1 for _, s in made.values() if s is RunStatus.COMPLETED)
    assert counts == {RunStatus.PENDING: 300 - done, RunStatus.COMPLETED: done}


def _expected(
    made: dict[str, tuple[str, RunStatus]],
    infos: dict[str, RunInfo],
    status: RunStatus | None,
    workflow: str | None,
) -> list[str]:
    ids = [
        r
        for r, (wf, st) in made.items()
        if (status is None or st is status) and (workflow is None or wf == workflow)
    ]
    return sorted(ids, key=lambda r: (-infos[r].created_at, r))


async def test_a_walk_by_cursors_shows_every_run_once_in_order_from_any_process(
    open_nats_world: OpenWorlds,
) -> None:
    """The process that gave a cursor out knows how deep it was; another one looks deeper
    until it finds it. Both walk the same pages."""
    world, other = await open_nats_world(), await open_nats_world()
    made = await _fill(world, 90)
    infos = {i.run_id: i for i in await world.list_runs(limit=1000)}
    for status, workflow in (
        (None, None),
        (RunStatus.COMPLETED, None),
        (None, _WFS[1]),
        (RunStatus.PENDING, _WFS[0]),
    ):
        expected = _expected(made, infos, status, workflow)
        walked: list[str] = []
        after: tuple[float, str] | None = None
        while True:
            page = await world.runs_page(after=after, limit=7, status=status, workflow=workflow)
            other._depths = runs_pages.Depths()  # a cursor this process never gave out
            again = await other.runs_page(after=after, limit=7, status=status, workflow=workflow)
            assert [r.run_id for r in again] == [r.run_id for r in page]
            if not page:
                break
            walked += [r.run_id for r in page]
            after = (page[-1].created_at, page[-1].run_id)
        assert walked == expected, (status, workflow)


async def test_an_index_of_the_first_layout_is_rebuilt_on_the_first_read(
    open_nats_world: OpenWorlds,
) -> None:
    """The stream still takes the first layout's subjects (a writer of the older version
    during an upgrade); a process's first read purges them and rebuilds from the log."""
    writer = await open_nats_world()
    made = await _fill(writer, 12)
    js, index = writer._log._js, writer._runs()
    await js.purge_stream(index.stream)
    for run_id, (workflow, status) in made.items():  # as the first layout's writer had it
        info = writer._events().cached_info(run_id)
        created = runs_index.time_token(info.created_at)
        subject = f"{writer.names.prefix}.ri.{status}.{workflow}.{created}.{run_id}"
        await js.publish(subject, runs_index.body(info), stream=index.stream)
    reader = await open_nats_world()
    page = await reader.runs_page(after=None, limit=50)
    assert sorted((r.run_id, r.status) for r in page) == sorted(
        (r, s) for r, (_, s) in made.items()
    )
    done = sum(1 for _, s in made.values() if s is RunStatus.COMPLETED)
    assert await reader.count_runs() == {RunStatus.PENDING: 12 - done, RunStatus.COMPLETED: done}
    legacy = runs_index.legacy_wildcard(reader.names)
    assert await index.subjects(index.stream, legacy) == []
    assert len(await index.subjects(index.stream, runs_index.wildcard(reader.names))) == 12
