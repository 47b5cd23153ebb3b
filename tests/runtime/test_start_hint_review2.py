"""Second review of the start hint (ea44e9a, 7a8e67e): the obligation to prove a hint is
held by the run's view (``RunState.hinted``), not by the delivery whose replay was built on
the hint. Whoever meets the refutation first clears it; a view dropped from the cache drops
it. The delivery that took the hint then appends unproven."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, wait_for
from tests.runtime.test_start_hint import _capture_starts, sh_tagged
from wayline._core.events import EventType, NewEvent
from wayline.world import FLOW_TOPIC


def _id() -> str:
    return "wf_" + uuid.uuid4().hex


async def _donor_hint_and_victim(
    engine: Engine, path: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, str]:
    """Another run's real hint (None on SQLite), and a live run no start message started."""
    sent = _capture_starts(engine.client.world, monkeypatch)
    async with engine.worker([sh_tagged]):
        donor = await engine.client.start(sh_tagged, path, "donor")
        assert await donor.result(timeout=20) == "donor"
    hints = [m["log"] for m in sent if "log" in m]
    victim = _id()
    data = {"workflow": "sh.tagged", "input": {"args": [path, "victim"]}}
    await engine.world.append(victim, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0)
    return (hints[0] if hints else None), victim


def _pause_after_read_started(
    world: Any, victim: str, monkeypatch: pytest.MonkeyPatch, meanwhile: Any
) -> None:
    """The first delivery of the victim's start runs ``meanwhile`` between its seeded read and
    its first append (any await there: another delivery, a client call in the process)."""
    read_started = world.read_started
    done: list[bool] = []

    async def pausing(run_id: str, hint: Any) -> Any:
        read = await read_started(run_id, hint)
        if run_id == victim and not done:
            done.append(True)
            # another task of the process (another delivery, a client call): not this one's
            await asyncio.create_task(meanwhile(), context=contextvars.Context())
        return read

    monkeypatch.setattr(world, "read_started", pausing)


async def test_a_refutation_met_by_another_delivery_leaves_the_hinted_one_unproven(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delivery A takes a start message carrying another run's hint and seeds the view.
    Delivery B (a wake of the same run, same process) reads the run (``_fresh`` resets the
    seeded view; ``hinted`` is kept), and its first append proves the hint: refuted, B fails,
    and ``_prove`` clears ``st.hinted``. A then appends the replay it built on the donor's
    run_created: no proof is owed any more, the dense seq (1) matches, and the victim runs
    the donor's input."""
    path = str(tmp_path / "marks")
    hint, victim = await _donor_hint_and_victim(engine, path, monkeypatch)
    other = await engine.make_world()  # never read the victim
    append = other.append
    b_appended = asyncio.Event()

    async def watching(run_id: str, events: Any, **kw: Any) -> Any:
        try:
            return await append(run_id, events, **kw)
        finally:
            if run_id == victim:
                b_appended.set()

    monkeypatch.setattr(other, "append", watching)

    async def another_delivery() -> None:
        await engine.world.enqueue(FLOW_TOPIC, {"runId": victim, "reason": "wake"})
        await asyncio.wait_for(b_appended.wait(), 20)

    _pause_after_read_started(other, victim, monkeypatch, another_delivery)
    async with engine.worker([sh_tagged], world=other, recover=False):
        # SQLite sends no hint: any ``log`` makes the handler call read_started (it reads)
        start = {"runId": victim, "reason": "start", "log": hint if hint is not None else {}}
        await engine.world.enqueue(FLOW_TOPIC, start)
        assert await engine.client.handle(victim).result(timeout=30) == "victim"
    assert Counter(lines(path)) == {"donor": 1, "victim": 1}


async def test_a_client_call_in_the_workers_process_neither_fails_nor_unproves_the_hint(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client and worker on one world (the embedded shape). While a delivery holds a view
    seeded from another run's hint, ``Client.cancel`` of that run reads it, and its append
    proves the hint: ``_RefutedHint`` escapes from ``cancel`` (no request written) and the
    obligation is gone; the delivery then writes the donor's input into the victim."""
    path = str(tmp_path / "marks")
    hint, victim = await _donor_hint_and_victim(engine, path, monkeypatch)
    other = await engine.make_world()
    client = wayline.Client(other)
    outcome: list[Any] = []

    async def cancel() -> None:
        try:
            outcome.append(await client.cancel(victim))
        except wayline.WaylineError as err:
            outcome.append(err)

    _pause_after_read_started(other, victim, monkeypatch, cancel)
    async with engine.worker([sh_tagged], world=other, recover=False):
        # SQLite sends no hint: any ``log`` makes the handler call read_started (it reads)
        start = {"runId": victim, "reason": "start", "log": hint if hint is not None else {}}
        await engine.world.enqueue(FLOW_TOPIC, start)

        async def ended() -> bool:
            info = await engine.world.get_run(victim)
            return info is not None and info.status.terminal

        await wait_for(ended, timeout=30)
    info = await engine.world.get_run(victim)
    assert info is not None
    assert (outcome, str(info.status), info.output, Counter(lines(path))) == (
        [True],
        "cancelled",
        None,
        {"donor": 1},
    )


async def test_a_seeded_view_dropped_from_the_cache_drops_the_proof(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process touches ``_CACHE_RUNS`` other runs between the seeding and the first
    append (a busy worker: 4096 here, 1 in the test). ``_state`` evicts the seeded view and
    its ``hinted`` with it; the append builds a new view by reading, owes no proof, and the
    replay built on the donor's hint is written."""
    from wayline.worlds.nats import eventlog

    path = str(tmp_path / "marks")
    hint, victim = await _donor_hint_and_victim(engine, path, monkeypatch)
    other = await engine.make_world()
    monkeypatch.setattr(eventlog, "_CACHE_RUNS", 1)

    async def busy() -> None:
        await other.get_run(_id())  # any other run this process reads meanwhile

    _pause_after_read_started(other, victim, monkeypatch, busy)
    async with engine.worker([sh_tagged], world=other, recover=False):
        # SQLite sends no hint: any ``log`` makes the handler call read_started (it reads)
        start = {"runId": victim, "reason": "start", "log": hint if hint is not None else {}}
        await engine.world.enqueue(FLOW_TOPIC, start)
        assert await engine.client.handle(victim).result(timeout=30) == "victim"
    assert Counter(lines(path)) == {"donor": 1, "victim": 1}


async def test_a_second_start_of_the_run_reseeding_the_view_does_not_prove_the_first(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two start messages of one run in one process: A carries an older run's hint (stream
    sequence x), C the run's own (y > x; e.g. the id was deleted and used again outside the
    dedup window, or A is forged). A seeds the view; C's ``read_started`` finds the view older
    than its hint, resets it and seeds its own, overwriting ``st.hinted``. A's append then
    finds ``st.events[0] is st.hinted`` (C's), owes no proof, publishes against y, lands:
    the run is driven with A's (the older run's) input."""
    path = str(tmp_path / "marks")
    hint, victim = await _donor_hint_and_victim(engine, path, monkeypatch)
    own = engine.world.start_hint(victim)  # what the victim's own start message carries
    other = await engine.make_world()
    read_started = other.read_started

    async def second_start_reads() -> None:  # C's delivery, up to its read_started
        await read_started(victim, own if own is not None else {})

    _pause_after_read_started(other, victim, monkeypatch, second_start_reads)
    async with engine.worker([sh_tagged], world=other, recover=False):
        start = {"runId": victim, "reason": "start", "log": hint if hint is not None else {}}
        await engine.world.enqueue(FLOW_TOPIC, start)
        assert await engine.client.handle(victim).result(timeout=30) == "victim"
    assert Counter(lines(path)) == {"donor": 1, "victim": 1}
