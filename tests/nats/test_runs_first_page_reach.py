"""A console's first runs page while its runs model loads, when the page lies deeper than one
window of the runs index's newest entries (runs created faster than the clocks' skew allowance
passes): the tail asks the server where the entries stored before the page's last run less
``SKEW`` begin and reads the windows down to there together, and the page is the one the loaded
model gives, in every status filter and workflow, for runs created in bursts, runs whose entries
were written again out of their creation order, and a run whose status changes while the page
is read. Against a real nats-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_model, runs_tail

_WF = "first-page-reach-wf"
_OTHER = "first-page-reach-other"

_CHOICES: list[dict[str, Any]] = [
    {},
    {"status": RunStatus.COMPLETED},
    {"status": RunStatus.PENDING},
    {"workflow": _WF},
    {"workflow": _OTHER, "status": RunStatus.COMPLETED},
]


async def _create(world: Any, i: int) -> str:
    run_id = new_run_id()
    flow = _WF if i % 3 else _OTHER
    events = [NewEvent(EventType.RUN_CREATED, data={"workflow": flow, "input": [i]})]
    if i % 4 == 0:
        events.append(NewEvent(EventType.RUN_COMPLETED, data={"output": i}))
    await world.append(run_id, events, expected_seq=0)
    return run_id


async def _fill(world: Any, bursts: int, size: int) -> list[str]:
    """``bursts`` bursts of ``size`` runs created at once (their creation times a few
    milliseconds apart at most), 20 ms apart: spread over less than the skew set below, so
    the first page needs many windows of the tail."""
    ids: list[str] = []
    for b in range(bursts):
        ids += await asyncio.gather(*(_create(world, b * size + i) for i in range(size)))
        await asyncio.sleep(0.02)
    assert await world.flush_runs_index()
    return ids


class _Rounds:
    """Counts the tail's rounds of reads: the round trips a page waits for one after
    another (reads asked for together are one round)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rounds = 0
        self.flying = 0
        self.gate = asyncio.Event()
        self.gate.set()
        read = runs_tail.RunsTail._read
        rounds = self

        async def counted(tail: Any, start: int, batch: int) -> list[Any]:
            if rounds.flying == 0:
                rounds.rounds += 1
            rounds.flying += 1
            try:
                await rounds.gate.wait()
                return await read(tail, start, batch)
            finally:
                rounds.flying -= 1

        monkeypatch.setattr(runs_tail.RunsTail, "_read", counted)


def _hold_load(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    gate = asyncio.Event()
    read = runs_model.RunsModel._read

    async def slow(model: Any, start: int, batch: int) -> list[Any]:
        await gate.wait()
        return await read(model, start, batch)

    monkeypatch.setattr(runs_model.RunsModel, "_read", slow)
    return gate


async def _loaded_pages(world: Any, limit: int) -> list[list[str]]:
    await world.follow_runs()
    assert await world.runs_followed(60.0) is not None
    return [
        [r.run_id for r in await world.runs_page(after=None, limit=limit, **chosen)]
        for chosen in _CHOICES
    ]


async def test_a_deep_first_page_is_read_in_a_few_rounds_and_is_the_loaded_model_s(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_nats_world()
    ids = await _fill(writer, 12, 8)
    monkeypatch.setattr(runs_tail, "WINDOW", 8)
    monkeypatch.setattr(runs_tail, "SKEW", 1.0)  # longer than the fill: every entry counts
    want = await _loaded_pages(await open_nats_world(), 5)
    assert len(set(ids)) == 96 and len(want[0]) == 5
    gate = _hold_load(monkeypatch)
    rounds = _Rounds(monkeypatch)
    console = await open_nats_world()
    await console.follow_runs()
    got = []
    for chosen in _CHOICES:
        rounds.rounds = 0
        page = await asyncio.wait_for(console.runs_page(after=None, limit=5, **chosen), 30.0)
        got.append([r.run_id for r in page])
        # at most: the entries written since the last page, one window back, then the
        # windows down to where the page is complete, eight asked for together (at most 11
        # windows: two rounds); 12 windows of 8 one after another before
        assert rounds.rounds <= 4, (chosen, rounds.rounds)
    assert got == want
    model = console._listing.model
    assert model is not None and not model.loaded
    gate.set()


async def test_the_first_page_is_the_loaded_model_s_with_entries_out_of_order_and_a_status_moving(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard (it passes at the starting commit too): runs created in bursts, the entries
    of older runs written again after newer runs' (a repair, a late status write), and a run
    of the page completed while the page's deep windows are read."""
    writer = await open_nats_world()
    ids = await _fill(writer, 10, 6)
    monkeypatch.setattr(runs_tail, "WINDOW", 4)
    monkeypatch.setattr(runs_tail, "SKEW", 1.0)
    # the oldest runs' entries written again: now the newest entries of the stream
    index = writer._listing.runs()
    for info in await writer.list_runs(limit=len(ids)):
        if info.run_id in ids[:12]:
            await index.put(info)
    gate = _hold_load(monkeypatch)
    rounds = _Rounds(monkeypatch)
    console = await open_nats_world()
    await console.follow_runs()
    first = await asyncio.wait_for(console.runs_page(after=None, limit=4), 30.0)
    moving = first[1].run_id
    rounds.gate.clear()  # the next page's reads wait while a run of it completes
    console._listing._tail = None  # read from the stream's end again
    page = asyncio.create_task(console.runs_page(after=None, limit=4))
    for _ in range(200):
        if rounds.flying:
            break
        await asyncio.sleep(0.01)
    assert rounds.flying
    await writer.append(moving, [NewEvent(EventType.RUN_COMPLETED, data={"output": 0})])
    assert await writer.flush_runs_index()
    rounds.gate.set()
    during = [r.run_id for r in await asyncio.wait_for(page, 30.0)]
    after = [
        [r.run_id for r in await console.runs_page(after=None, limit=4, **chosen)]
        for chosen in _CHOICES
    ]
    gate.set()
    want = await _loaded_pages(await open_nats_world(), 4)
    assert during == want[0] == [r.run_id for r in first]
    assert after == want
