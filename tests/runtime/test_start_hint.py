"""A start message carries the log its starter wrote (``World.start_hint``; NATS), so the
worker taking it drives a fresh run without reading it. A hint is checked as stored bytes are
and only ever saves a read: one that is out of date (the message came again after the run
moved) or forged costs a failed append and a read, never a body run twice or a run driven from
a log it does not have. On both worlds (SQLite reads the run either way)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime.flows import lines, mark
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType, NewEvent
from wayline.world import FLOW_TOPIC


@wayline.step(name="sh.mark")
async def sh_mark(path: str, tag: str) -> str:
    mark(path, tag)
    return tag


@wayline.workflow(name="sh.sleepy")
async def sh_sleepy(path: str) -> str:
    await sh_mark(path, "first")
    await wayline.sleep(3600)
    return await sh_mark(path, "second")


@wayline.workflow(name="sh.tagged")
async def sh_tagged(path: str, tag: str) -> str:
    return await sh_mark(path, tag)


def _id() -> str:
    return "wf_" + uuid.uuid4().hex


def _capture_starts(world: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The start messages ``world`` sends from now on, as sent."""
    sent: list[dict[str, Any]] = []
    enqueue = world.enqueue

    async def capturing(topic: str, payload: Any, **kw: Any) -> Any:
        if topic == FLOW_TOPIC and payload.get("reason") == "start":
            sent.append(json.loads(json.dumps(payload)))
        return await enqueue(topic, payload, **kw)

    monkeypatch.setattr(world, "enqueue", capturing)
    return sent


async def test_a_start_message_that_comes_again_after_the_run_moved_runs_nothing_twice(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's first step ran and it sleeps; its start message (hint and all) comes again
    to a worker of a world that never saw the run: the hint says the run has not started.
    The worker's first append is refused (the log moved), it reads, and the run sleeps on."""
    path = str(tmp_path / "marks")
    sent = _capture_starts(engine.client.world, monkeypatch)
    async with engine.worker([sh_sleepy]):
        handle = await engine.client.start(sh_sleepy, path)

        async def sleeping() -> bool:
            events = await engine.world.list_events(handle.run_id)
            return bool(of_type(events, EventType.WAIT_CREATED))

        await wait_for(sleeping, timeout=20)
    [start] = sent
    before = await engine.world.list_events(handle.run_id)
    other = await engine.make_world()
    hinted: list[Any] = []  # the reads of its deliveries (SQLite sends no hint: read_run)
    read_started, read_run = other.read_started, other.read_run

    async def recording_started(run_id: str, hint: Any) -> Any:
        read = await read_started(run_id, hint)
        hinted.append(hint)
        return read

    async def recording_run(run_id: str) -> Any:
        read = await read_run(run_id)
        hinted.append(None)
        return read

    monkeypatch.setattr(other, "read_started", recording_started)
    monkeypatch.setattr(other, "read_run", recording_run)
    async with engine.worker([sh_sleepy], world=other, recover=False):  # it reads nothing
        await engine.world.enqueue(FLOW_TOPIC, start)  # its first delivery: attempt 1

        async def taken() -> bool:
            return bool(hinted)

        await wait_for(taken, timeout=20)
        await asyncio.sleep(0.5)  # the delivery drives on from what it read
        after = await engine.world.list_events(handle.run_id)
        assert [(e.seq, e.type) for e in after] == [(e.seq, e.type) for e in before]
        assert lines(path) == ["first"]
        assert await engine.client.wake_up(handle.run_id)
        assert await handle.result(timeout=20) == "second"
    events = await engine.world.list_events(handle.run_id)
    assert len(of_type(events, EventType.RUN_STARTED)) == 1
    assert Counter(lines(path)) == {"first": 1, "second": 1}


FORGED: list[Any] = [
    "x",
    [],
    {},
    {"seq": 0, "at": 1.0, "entry": "{}"},
    {"seq": True, "at": 1.0, "entry": "{}"},
    {"seq": 1, "at": "nan", "entry": "{}"},
    {"seq": 1, "at": 1e400, "entry": "{}"},
    {"seq": 10**30, "at": 1.0, "entry": "{}"},
    {"seq": 1, "at": 1.0, "entry": "not json"},
    {"seq": 1, "at": 1.0, "entry": '{"s": 1, "e": []}'},
    {"seq": 1, "at": 1.0, "entry": '{"s": 1, "e": [{"t": "run_started", "c": null, "d": {}}]}'},
    {"seq": 1, "at": 1.0, "entry": "{" + " " * 10_000 + "}"},
]


async def test_a_forged_or_copied_hint_costs_a_read_and_nothing_else(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs created with no start message of their own, then started by messages whose hint
    is garbage, or the real hint of another run (its entry decodes, its stream sequence is not
    this run's): each run runs from its own log, with its own input, once."""
    path = str(tmp_path / "marks")
    sent = _capture_starts(engine.client.world, monkeypatch)
    other = await engine.make_world()  # it knows none of the runs: it takes the hints as sent
    async with engine.worker([sh_tagged], world=other, recover=False):
        donor = await engine.client.start(sh_tagged, path, "donor")
        assert await donor.result(timeout=20) == "donor"
        hints = [m["log"] for m in sent if "log" in m]
        if hints:  # a world that sends hints: the donor's, as it was sent
            assert hints[0]["seq"] > 0
        runs = []
        for n, forged in enumerate([*FORGED, *hints]):
            run_id, tag = _id(), f"run-{n}"
            data = {"workflow": "sh.tagged", "input": {"args": [path, tag]}}
            await engine.world.append(
                run_id, [NewEvent(EventType.RUN_CREATED, data=data)], expected_seq=0
            )
            await engine.world.enqueue(
                FLOW_TOPIC, {"runId": run_id, "reason": "start", "log": forged}
            )
            runs.append((run_id, tag))
        for run_id, tag in runs:
            assert await engine.client.handle(run_id).result(timeout=30) == tag
    assert Counter(lines(path)) == {"donor": 1, **{tag: 1 for _, tag in runs}}
