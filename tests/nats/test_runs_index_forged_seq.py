"""A forged runs-index entry whose body claims a huge log position (``"seq"``), on a real
nats-server (issue #37). Anyone who can publish on the index's subjects can store one; it must
not outrank the run's real entry once the run moves on (the console's runs model, its pages
filtered by status and its counts), and the index's repair must purge the forged entry, never
the real one (``RunsIndex.put``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import nats
from tests.nats_fixtures import OpenWorlds, console_api
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_model

_WF = "forged-seq-wf"
HUGE = 10**15


async def _run(world: Any) -> str:
    run_id = new_run_id()
    data = {"workflow": _WF, "input": []}
    await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0)
    assert await world.flush_runs_index()
    return run_id


async def _forge(world: Any, run_id: str, status: RunStatus, seq: object) -> str:
    """Publish an entry naming ``run_id`` under ``status`` as an outsider does (a connection
    of its own), its body claiming the log position ``seq``; returns its subject."""
    info = await world.get_run(run_id)
    index = world._listing.runs()
    subject: str = index.subject_of(status, _WF, info.created_at, run_id)
    body = json.dumps({"workflow": _WF, "run": run_id, "seq": seq}).encode()
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        await nc.jetstream().publish(subject, body)
    finally:
        await nc.close()
    return subject


async def _cancelled(world: Any, count: int) -> list[str]:
    """``count`` runs moved on to cancelled, their entries written."""
    made = [await _run(world) for _ in range(count)]
    for run_id in made:
        await world.append(run_id, [NewEvent(EventType.RUN_CANCELLED)])
    assert await world.flush_runs_index()
    return made


@contextlib.asynccontextmanager
async def _loaded_console(open_nats_world: OpenWorlds) -> AsyncIterator[Any]:
    """The console's API over a world of its own, its runs model loaded."""
    console = await open_nats_world()
    async with console_api(console) as http:
        assert (await http.get("/api/runs")).status_code == 200
        assert await console.runs_followed(30.0) is not None
        yield http


async def _entries(world: Any, run_id: str) -> list[str]:
    """The subjects of the index that name ``run_id``."""
    index = world._listing.runs()
    info = await world.get_run(run_id)
    return sorted(await index.subjects(index.stream, index._statuses_filter(info)))


async def test_a_forged_huge_seq_loses_to_the_run_s_real_entry_in_the_console(
    open_nats_world: OpenWorlds,
) -> None:
    """The forged entry is stored before the console loads its runs model and wins there at
    first (nothing contradicts it yet); once the run moves on, the real entry is checked
    against the run's log, the forged claim (past the log's last event) is not believed, and
    the console's pages by status and counts show the real status."""
    writer = await open_nats_world()
    run_id = await _run(writer)
    forged = await _forge(writer, run_id, RunStatus.FAILED, HUGE)
    console = await open_nats_world()
    async with console_api(console) as http:
        assert (await http.get("/api/runs")).status_code == 200
        assert await console.runs_followed(30.0) is not None
        await writer.append(run_id, [NewEvent(EventType.RUN_CANCELLED)])
        assert await writer.flush_runs_index()
        cancelled = (await http.get("/api/runs", params={"status": "cancelled"})).json()
        assert [r["runId"] for r in cancelled["runs"]] == [run_id]
        assert cancelled["counts"] == {"cancelled": 1}
        failed = (await http.get("/api/runs", params={"status": "failed"})).json()
        assert failed["runs"] == []
    entries = await _entries(writer, run_id)
    assert forged not in entries
    assert entries == [writer._listing.runs().subject(await writer.get_run(run_id))]
    listed = await writer.list_runs(status=RunStatus.CANCELLED)  # what ``runs list`` reads
    assert [r.run_id for r in listed] == [run_id]


async def test_the_repair_keeps_the_real_entry_and_purges_the_forged_one(
    open_nats_world: OpenWorlds,
) -> None:
    """A page that finds a run's entry disagreeing with its log writes the entry again
    (``RunsIndex.put``): a forged entry claiming a later log position than the log holds is
    the one purged, and a reader of the index's names (no model) sees the real status."""
    writer = await open_nats_world()
    [run_id] = await _cancelled(writer, 1)
    real = writer._listing.runs().subject(await writer.get_run(run_id))
    forged = await _forge(writer, run_id, RunStatus.COMPLETED, HUGE)
    reader = await open_nats_world()  # follows nothing: pages read the index's names
    page = await reader.runs_page(after=None, limit=10)
    assert [(r.run_id, r.status) for r in page] == [(run_id, RunStatus.CANCELLED)]
    assert await _entries(writer, run_id) == [real]
    page = await reader.runs_page(after=None, limit=10, status=RunStatus.CANCELLED)
    assert [r.run_id for r in page] == [run_id]
    assert forged not in await _entries(writer, run_id)


async def test_a_forged_seq_that_is_no_number_fails_no_repair(
    open_nats_world: OpenWorlds,
) -> None:
    """A forged body whose ``seq`` is no integer is no claim at all: the repair goes on and
    purges it (it failed with a ``ValueError`` wrapped as a world error)."""
    writer = await open_nats_world()
    [run_id] = await _cancelled(writer, 1)
    real = writer._listing.runs().subject(await writer.get_run(run_id))
    await _forge(writer, run_id, RunStatus.COMPLETED, "not a number")
    await writer._listing.runs().put(await writer.get_run(run_id))
    assert await _entries(writer, run_id) == [real]


async def test_a_forged_entry_stored_after_the_run_ended_is_gone_once_a_page_shows_it(
    open_nats_world: OpenWorlds,
) -> None:
    """The run does not move on: the forged entry, stored after its last real one, outranks
    it in the loaded model until a page shows the run. That page's row is read from the log,
    its repair purges the forged entry and writes the real one again, and the model's next
    catch-up checks the forged claim against the log: the counts and the pages by status
    are the real ones from the next call on."""
    writer = await open_nats_world()
    [run_id] = await _cancelled(writer, 1)
    async with _loaded_console(open_nats_world) as http:
        forged = await _forge(writer, run_id, RunStatus.COMPLETED, HUGE)
        shown = (await http.get("/api/runs")).json()
        assert [(r["runId"], r["status"]) for r in shown["runs"]] == [(run_id, "cancelled")]
        after = (await http.get("/api/runs", params={"status": "cancelled"})).json()
        assert [r["runId"] for r in after["runs"]] == [run_id]
        assert after["counts"] == {"cancelled": 1}
    assert forged not in await _entries(writer, run_id)


async def test_doubted_runs_are_checked_a_bounded_number_a_catch_up(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forged entries stored by the thousand must not hold a read behind a log read each: a
    catch-up checks at most ``DOUBTS_AT_ONCE`` doubted runs, and the next ones the rest."""
    monkeypatch.setattr(runs_model, "DOUBTS_AT_ONCE", 1)
    writer = await open_nats_world()
    made = await _cancelled(writer, 2)
    async with _loaded_console(open_nats_world) as http:
        for run_id in made:
            await _forge(writer, run_id, RunStatus.COMPLETED, HUGE)
        # the rows repair the index; the counts' catch-up then reads the real entries again,
        # both doubted, and checks one of them
        shown = (await http.get("/api/runs")).json()
        assert shown["counts"] == {"cancelled": 1, "completed": 1}
        shown = (await http.get("/api/runs")).json()  # the next catch-up checks the other
        assert shown["counts"] == {"cancelled": 2}
