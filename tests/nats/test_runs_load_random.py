"""Seeded histories around the runs model's load from the index's names: runs created,
moved and deleted between the names' answer and the read from the sequence before them; the
loaded model must hold what a fresh reader of the logs finds (a run another process deleted
may stay until a sweep, as documented), and the server's counts must be the names' counts."""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds
from wayline._core.events import EventType, NewEvent, RunStatus
from wayline._core.ids import new_run_id
from wayline.worlds.nats import runs_index

T = EventType
_FLOWS = ["plain-wf", "dotted.wf name", "w" * 121]
_NEXT = {
    RunStatus.PENDING: [[NewEvent(T.RUN_STARTED)]],
    RunStatus.RUNNING: [
        [NewEvent(T.RUN_PAUSED, data={"reason": "t", "statusBefore": "running"})],
        [NewEvent(T.RUN_COMPLETED, data={"output": 1})],
        [NewEvent(T.RUN_CANCELLED)],
    ],
    RunStatus.PAUSED: [[NewEvent(T.RUN_UNPAUSED, data={"status": "running"})]],
}
_AFTER = {
    (RunStatus.PENDING, 0): RunStatus.RUNNING,
    (RunStatus.RUNNING, 0): RunStatus.PAUSED,
    (RunStatus.RUNNING, 1): RunStatus.COMPLETED,
    (RunStatus.RUNNING, 2): RunStatus.CANCELLED,
    (RunStatus.PAUSED, 0): RunStatus.RUNNING,
}


class _History:
    def __init__(self, world: Any, rng: random.Random) -> None:
        self.world, self.rng = world, rng
        self.status: dict[str, RunStatus] = {}

    async def create(self) -> str:
        run_id = new_run_id() if self.rng.random() < 0.9 else "r" * 121 + new_run_id()
        flow = self.rng.choice(_FLOWS)
        created = NewEvent(T.RUN_CREATED, data={"workflow": flow, "input": []})
        await self.world.append(run_id, [created], expected_seq=0)
        self.status[run_id] = RunStatus.PENDING
        for _ in range(self.rng.randint(0, 3)):
            await self.move(run_id)
        return run_id

    async def move(self, run_id: str | None = None) -> None:
        live = [r for r, s in self.status.items() if s in _NEXT]
        if run_id is None:
            if not live:
                return
            run_id = self.rng.choice(live)
        status = self.status[run_id]
        if status not in _NEXT:
            return
        at = self.rng.randrange(len(_NEXT[status]))
        await self.world.append(run_id, _NEXT[status][at])
        self.status[run_id] = _AFTER[(status, at)]


def _hold_listing(
    monkeypatch: pytest.MonkeyPatch, index: Any
) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the model's load right after the index's names are answered."""
    gate, reached = asyncio.Event(), asyncio.Event()
    real = runs_index.RunsIndex.listed

    async def held(self: Any, stream: str, pattern: str) -> Any:
        mine = self is index and pattern == runs_index.wildcard(self.names)
        if mine and BEFORE and not reached.is_set():
            reached.set()
            await gate.wait()
        out = await real(self, stream, pattern)
        if mine and not BEFORE and not reached.is_set():
            reached.set()
            await gate.wait()
        return out

    monkeypatch.setattr(runs_index.RunsIndex, "listed", held)
    return gate, reached


async def _truth(reader: Any) -> dict[str, RunStatus]:
    page = await reader.runs_page(after=None, limit=10_000)
    return {r.run_id: r.status for r in page}


# more seeds, the hold before the names' request, and several partitions, by hand:
# RUNSLOAD_SEEDS=30 RUNSLOAD_BEFORE=1 RUNSLOAD_PARTS=3 (30 seeds each passed)
SEEDS = int(os.environ.get("RUNSLOAD_SEEDS", "6"))
BEFORE = os.environ.get("RUNSLOAD_BEFORE", "0") == "1"
PARTS = int(os.environ.get("RUNSLOAD_PARTS", "1"))
CONSOLE_DELETES = os.environ.get("RUNSLOAD_CONSOLE_DELETES", "1") == "1"


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_a_model_loaded_from_the_names_holds_what_the_logs_hold(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    writer = await open_nats_world(partitions=PARTS)
    history = _History(writer, rng)
    for _ in range(rng.randint(3, 20)):
        await history.create()
    for _ in range(rng.randint(0, 10)):
        await history.move()
    assert await writer.flush_runs_index()

    console = await open_nats_world(partitions=PARTS)
    gate, reached = _hold_listing(monkeypatch, console._listing.runs())
    await console.follow_runs()
    await asyncio.wait_for(reached.wait(), 30.0)
    # between the names' answer and the read from the sequence before them
    deleted_by_console: set[str] = set()
    deleted_by_writer: set[str] = set()
    for _ in range(rng.randint(1, 12)):
        op = rng.random()
        if op < 0.3:
            await history.create()
        elif op < 0.75:
            await history.move()
        elif op < 0.9 and CONSOLE_DELETES:
            cancelled = {r for r, s in history.status.items() if s is RunStatus.CANCELLED}
            await console.delete_runs(older_than=0.0, statuses=[RunStatus.CANCELLED])
            deleted_by_console |= cancelled
            for r in cancelled:
                del history.status[r]
        else:
            done = {r for r, s in history.status.items() if s is RunStatus.COMPLETED}
            await writer.delete_runs(older_than=0.0, statuses=[RunStatus.COMPLETED])
            deleted_by_writer |= done
            for r in done:
                del history.status[r]
    assert await writer.flush_runs_index()
    assert await console.flush_runs_index()
    gate.set()
    model = await console.runs_followed(30.0)
    assert model is not None
    held = {r: h.status for r, h in model.runs.items()}
    reader = await open_nats_world(partitions=PARTS)
    truth = await _truth(reader)
    assert truth == history.status
    extra = set(held) - set(truth)
    assert not extra & deleted_by_console, "a run this process deleted is still held"
    assert extra <= deleted_by_writer
    assert {r: s for r, s in held.items() if r in truth} == truth
    # the server's counts are the names' counts, and the truth's, for each workflow
    index = reader._listing.runs()
    flows = {r: (await reader.read_run(r))[0].workflow for r in truth}
    for flow in [None, *_FLOWS]:
        want = Counter(s for r, s in truth.items() if flow is None or flows[r] == flow)
        got = await index.counts(flow)
        assert got == dict(+want), (flow, got, want)
        assert len(await index.named(None, flow)) == sum(want.values())
