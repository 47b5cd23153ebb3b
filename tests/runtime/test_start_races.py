"""Adversarial races on starting runs, on both worlds: one run per id whoever starts it and
however often (the first start's input wins: a start with other arguments answers the first
run), no step body twice, no run left without its queue message."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import start_flows as sf
from tests.runtime.harness import Engine, of_type
from wayline._core.events import EventType


def _id() -> str:
    return "wf_" + uuid.uuid4().hex


async def test_clients_racing_one_id_with_other_inputs_get_the_first_run(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "m")
    clients = [engine.client] + [wayline.Client(await engine.make_world()) for _ in range(2)]
    ids = [_id() for _ in range(12)]
    async with (
        engine.worker(sf.WORKFLOWS),
        engine.worker(sf.WORKFLOWS, world=await engine.make_world()),
    ):
        handles = await asyncio.gather(
            *(
                c.start(sf.st_counted, path, f"{run_id}-{n}", run_id=run_id)
                for run_id in ids
                for n, c in enumerate(clients + clients[:1])  # one client twice
            )
        )
        results = await asyncio.gather(*(h.result(timeout=30) for h in handles))
    per_id: dict[str, set[str]] = {}
    for h, r in zip(handles, results, strict=True):
        per_id.setdefault(h.run_id, set()).add(r)
    for run_id in ids:
        events = await engine.world.list_events(run_id)
        [created] = of_type(events, EventType.RUN_CREATED)
        first = created.data["input"]
        assert len(per_id[run_id]) == 1, per_id[run_id]  # every caller got the one run
        (tag,) = per_id[run_id]
        assert tag.startswith(run_id)
        assert len(of_type(events, EventType.RUN_STARTED)) == 1
        assert str(first).count(tag) == 1, (first, tag)
    assert sum(h._fresh for h in handles) <= len(ids)
    bodies = Counter(sf.lines(path))
    assert sorted(bodies) == sorted(f"body {next(iter(per_id[i]))}" for i in ids)
    assert set(bodies.values()) == {1}, bodies
    assert len(await engine.world.list_runs(limit=1000)) == len(ids)


async def _ended_once(engine: Engine, path: str, run_id: str, tag: str) -> None:
    handle = await engine.client.start(sf.st_counted, path, tag, run_id=run_id)
    assert await handle.result(timeout=20) == tag


async def test_a_start_between_a_cleanups_purge_and_its_queue_sweep_keeps_its_message(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup deletes an ended run; its id is started again after the run's log was purged
    but before the cleanup swept the queue for the deleted run's messages, while the live
    worker is busy elsewhere (its receive held back). The new run's start message is not the
    old run's: it stays, and the new run ends. On NATS the sweep removed it, and the new run
    stayed pending for good (only a worker's start re-arms such a run); SQLite deletes in one
    transaction."""
    path, run_id = str(tmp_path / "m"), _id()
    busy = asyncio.Event()
    busy.set()
    worker_world = await engine.make_world()
    receive = worker_world.receive

    async def held(*args: object, **kwargs: object) -> object:
        await busy.wait()
        return await receive(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(worker_world, "receive", held)
    async with engine.worker(sf.WORKFLOWS, world=worker_world):
        await _ended_once(engine, path, run_id, "old")
        busy.clear()
        await asyncio.sleep(0.7)  # receives under way end (they wait at most 0.5 s)
        purged, go_on = asyncio.Event(), asyncio.Event()
        if engine.world.url.startswith("nats"):
            from wayline.worlds.nats.retention import Retention

            sweep = Retention._drop_messages

            async def paused(self: Retention, *args: Any) -> None:
                purged.set()
                await go_on.wait()
                await sweep(self, *args)

            monkeypatch.setattr(Retention, "_drop_messages", paused)
        else:
            purged.set()
        cleanup = asyncio.ensure_future(engine.world.delete_runs(older_than=0))
        await asyncio.wait_for(purged.wait(), 10)
        other = wayline.Client(await engine.make_world())
        handle = await other.start(sf.st_counted, path, "new", run_id=run_id)
        go_on.set()
        assert await cleanup == 1
        woken = await engine.world.runs_with_messages()
        assert woken is None or run_id in woken, "the new run has no queue message"
        busy.set()
        assert await handle.result(timeout=15) == "new"
    assert sf.lines(path) == ["body old", "body new"]
