"""A console's deep first page while its runs model loads (``runs_tail``), when the index's
entries around the page's reach were purged, as a status change purges a run's older entry,
and when the server's answer to where the page's entries end names no entry (a replica behind
answered it): the tail asks where to stop once, reads down to there in one round, and reads
no more than it needs. Against a real nats-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats.test_runs_first_page_reach import _CHOICES, _hold_load, _loaded_pages
from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_tail

_WF = "first-page-reach-wf"


async def _fill_moving(world: Any, count: int) -> None:
    """Runs created one after another, four in five completed at once: each completed run's
    pending entry is purged, so the sequence below most entries is gone."""
    for i in range(count):
        run_id = new_run_id()
        created = NewEvent(EventType.RUN_CREATED, data={"workflow": _WF, "input": [i]})
        await world.append(run_id, [created], expected_seq=0)
        assert await world.flush_runs_index()
        await asyncio.sleep(0.01)
        if i % 5:
            await world.append(run_id, [NewEvent(EventType.RUN_COMPLETED, data={"output": i})])
            assert await world.flush_runs_index()


def _count_below(monkeypatch: pytest.MonkeyPatch, answer: Any = ...) -> list[int | None]:
    asked: list[int | None] = []
    below = runs_tail.RunsTail._below

    async def counted(tail: Any, before: float) -> int | None:
        found = await below(tail, before) if answer is ... else answer
        asked.append(found)
        return found

    monkeypatch.setattr(runs_tail.RunsTail, "_below", counted)
    return asked


async def test_a_deep_first_page_over_purged_entries_asks_where_to_stop_once(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_nats_world()
    await _fill_moving(writer, 60)
    monkeypatch.setattr(runs_tail, "WINDOW", 4)
    monkeypatch.setattr(runs_tail, "SKEW", 0.1)  # shorter than the fill
    chosen_ones = _CHOICES[:4]  # the last names no run: the whole stream is read
    want = (await _loaded_pages(await open_nats_world(), 5))[:4]
    gate = _hold_load(monkeypatch)
    asked = _count_below(monkeypatch)
    console = await open_nats_world()
    await console.follow_runs()
    got, seen = [], []
    for chosen in chosen_ones:
        asked.clear()
        console._listing._tail = None  # each page read from the stream's end
        page = await asyncio.wait_for(console.runs_page(after=None, limit=5, **chosen), 30.0)
        got.append([r.run_id for r in page])
        seen.append((chosen, list(asked)))
        tail = console._listing._tail
        assert tail is not None and tail.bound is not None  # the stream was not read whole
    gate.set()
    assert got == want
    # one answer of where to stop, and the read down to there proves the page; the entry
    # just below the answer was purged, and asking again gave the same answer
    assert all(len(found) == 1 for _, found in seen), seen


async def test_no_entry_where_the_page_should_stop_reads_one_window_not_the_stream(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = await open_nats_world()
    await _fill_moving(writer, 60)
    monkeypatch.setattr(runs_tail, "WINDOW", 4)
    monkeypatch.setattr(runs_tail, "SKEW", 0.1)
    want = (await _loaded_pages(await open_nats_world(), 5))[0]
    gate = _hold_load(monkeypatch)
    asked = _count_below(monkeypatch, None)  # a replica behind: none stored at or after
    console = await open_nats_world()
    await console.follow_runs()
    page = await asyncio.wait_for(console.runs_page(after=None, limit=5), 30.0)
    tail = console._listing._tail
    gate.set()
    assert [r.run_id for r in page] == want
    assert asked
    # read on a window at a time, as without the answer, instead of the whole stream
    assert tail is not None and tail.bound is not None and tail.floor > tail.first + 20
