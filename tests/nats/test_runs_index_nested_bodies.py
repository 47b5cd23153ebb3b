"""Bodies nested past the JSON decoder's stack in the runs index's stream, on a real
nats-server: the console's runs call still answers (never a 500), before its runs model has
loaded (the page read from the index's newest entries, ``runs_tail``), once it has, and from
the index's names.

The index's stream is read without a subject filter (``runs_model.read_window``), so a message
on another subject of the stream (a stream configured by hand to hold another prefix's
subjects too, or one whose older layout's entries are still stored) reaches the reader too: it
names no run and must be passed over unread, as it was never read at all with the filter.
Anyone who can publish on the index's own subjects can store such a body as well; a hashed
entry's body is decoded (``runs_model.parse``, ``RunsIndex._body``), and a ``RecursionError``
there is no ``ValueError``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import nats
from tests.nats import test_runs_first_page_equals_loaded as equals
from tests.nats_fixtures import OpenWorlds, hold_before
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_model

_WF = "nested-body-wf"
NESTED = b"[" * 5000
"""A body the JSON decoder gives up on with ``RecursionError`` (not a ``ValueError``)."""


@contextlib.asynccontextmanager
async def _api(world: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The console's API over ``world``, an app's exception answered as the server would: a
    500 (``console_api`` raises it into the test instead)."""
    import wayline
    from wayline.cli.console import create_app

    app = create_app(wayline.Client(world), world_url="nats://test")
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


async def _runs(world: Any, count: int) -> list[str]:
    made: list[str] = []
    for i in range(count):
        run_id = new_run_id()
        data = {"workflow": _WF, "input": [i]}
        await world.append(run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0)
        made.append(run_id)
    assert await world.flush_runs_index()
    return made


async def _forge(world: Any, subject: str, data: bytes) -> None:
    """Publish ``data`` on ``subject`` as an outsider does: a connection of its own."""
    nc = await nats.connect(world._options.servers, max_reconnect_attempts=0)
    try:
        await nc.jetstream().publish(subject, data)
    finally:
        await nc.close()


async def test_a_foreign_message_past_the_loaded_model_is_never_decoded(
    open_nats_world: OpenWorlds,
) -> None:
    """A message on another prefix's subject, stored in the index's stream after the model
    loaded, is read by the model's catch-up (no subject filter) and must be passed over
    before anything decodes its body: its name holds ``=h`` as a hashed entry's does."""
    writer = await open_nats_world()
    made = await _runs(writer, 5)
    console = await open_nats_world()
    index = writer._listing.runs()
    foreign = await equals.add_foreign_subjects(writer, ".>")
    async with _api(console) as http:
        first = await http.get("/api/runs")
        assert first.status_code == 200, first.text
        assert await console.runs_followed(30.0) is not None
        # another world's entry, hashed: ``<foreign>.ri.<status>.<workflow>.<created>.<run>``
        hashed = "=h" + "0" * 64
        subject = index.subject_of(RunStatus.PENDING, _WF, 1.0, "wf_x")
        await _forge(writer, f"{foreign}{subject[len(index.names.prefix) : -4]}{hashed}", NESTED)
        await _forge(writer, f"{foreign}.other.{hashed}", NESTED)
        later = await _runs(writer, 1)
        loaded = await http.get("/api/runs")
        assert loaded.status_code == 200, loaded.text
        assert {r["runId"] for r in loaded.json()["runs"]} == set(made + later)
        assert loaded.json()["counts"] == {"pending": 6}


async def test_a_nested_body_on_the_index_s_own_subjects_fails_no_call(
    open_nats_world: OpenWorlds,
) -> None:
    """A hashed entry's body nested past the decoder's stack, among the index's newest
    entries: the first page (read from the tail), the pages of the loaded model and the pages
    of a reader that lists the index's names all answer, the entry naming no run."""
    writer = await open_nats_world()
    made = await _runs(writer, 5)
    index = writer._listing.runs()
    # a workflow and a run id too long for a token: both hashed, read from the body
    await _forge(writer, index.subject_of(RunStatus.PENDING, "x" * 200, 2.0, "y" * 200), NESTED)
    console = await open_nats_world()
    async with _api(console) as http:
        first = await http.get("/api/runs")
        assert first.status_code == 200, first.text
        assert {r["runId"] for r in first.json()["runs"]} == set(made)
        await console.runs_followed(30.0)
        model = console._listing.model
        assert model is not None and model.loaded and not model.failed
        loaded = await http.get("/api/runs")
        assert loaded.status_code == 200, loaded.text
        assert {r["runId"] for r in loaded.json()["runs"]} == set(made)
    reader = await open_nats_world()  # follows nothing: the index's names
    page = await reader.runs_page(after=None, limit=10)
    assert {r.run_id for r in page} == set(made)


async def test_the_first_pages_read_past_foreign_messages_and_rollups(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows of the tail that hold other subjects' messages only, and messages of one
    subject rewritten (the stream keeps one a subject: the older ones leave holes in the
    middle of a window), between the runs' entries: the first pages before the load are the
    loaded model's, and the next pages by cursor too."""
    from wayline.worlds.nats import runs_tail

    monkeypatch.setattr(runs_tail, "SKEW", 0.2)
    monkeypatch.setattr(runs_tail, "WINDOW", 8)
    writer = await open_nats_world()
    js = writer._listing._js()
    foreign = await equals.add_foreign_subjects(writer, ".>")
    made = []
    for round_ in range(4):
        for i in range(6):
            made.append(await equals._run(writer, round_ * 6 + i))
        assert await writer.flush_runs_index()
        for j in range(20):  # whole windows of them, and rollups of one subject
            await js.publish(f"{foreign}.ri.pending.{_WF}.{round_}.wf_{j % 10}", b"{}")
        await writer.append(made[round_ * 6 + 1], [NewEvent(EventType.RUN_CANCELLED)])
        assert await writer.flush_runs_index()
        await asyncio.sleep(0.3)  # past the tail's skew: older rounds lie below its bound
    want = await equals.loaded_pages(open_nats_world)
    # the load held before it reads anything (a walk to the stream's start reconciles the
    # index with the log, which lists the index's names)
    hold = hold_before(monkeypatch, runs_model.RunsModel, "_fill_from_index")
    async with equals.held_load(open_nats_world, hold, want) as held:
        held.go_on.set()
        assert await held.console.runs_followed(30.0) is held.model
    assert held.before == want
