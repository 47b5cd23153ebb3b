"""Gathered appends (``gather.py``) under faults, on real nats-servers: two processes batching
the same runs, a server killed in the middle of a batch, the option's bad values. Each run's
append is either answered and stored once, or refused and not stored."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import nats.errors
import pytest

from tests.nats.test_gathered_appends import _runs
from tests.nats_fixtures import NatsCluster, NatsServer, OpenWorlds
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline.errors import ConfigurationError, SequenceConflictError, WorldUnavailableError
from wayline.worlds.nats import NatsWorld, gather, wire


def _steps(world: Any, run_ids: list[str], name: str) -> list[Any]:
    return [
        world.append(r, [NewEvent(T.STEP_CREATED, f"{name}-{r}", {})], expected_seq=2)
        for r in run_ids
    ]


async def _stored_at_most_once(
    world: Any, reader: Any, run_ids: list[str], results: list[Any], name: str
) -> None:
    """Each run's step ``name`` is stored at most once, at seq 3 when its append was answered
    (an append that failed says the world was unavailable), and the run takes its next append
    at the sequence after what is stored.

    ``reader`` is another process's world, which has the read-your-writes of its own appends
    only (docs/nats.md, "Reads of a run"): its read is a direct get that any replica answers,
    and one that has not applied the newest acknowledged append yet (a quorum of two answers
    for three replicas, more so around a leader change) shows the log without it. So the run
    takes its next append first, from the writer, and the reader reads until its log holds
    that append: a log that ends there holds every message stored before it."""
    for run_id, result in zip(run_ids, results, strict=True):
        assert isinstance(result, (list, WorldUnavailableError)), result
        step = f"{name}-{run_id}"
        after = await world.append(run_id, [NewEvent(T.STEP_COMPLETED, step, {})])
        events = await _read_up_to(reader, run_id, after[-1].seq)
        assert [(e.type, e.correlation_id) for e in events[-1:]] == [(T.STEP_COMPLETED, step)]
        ids = [e.correlation_id for e in events[:-1]]
        assert ids.count(step) <= 1, ids
        if isinstance(result, list):
            assert [e.seq for e in result] == [3]
            assert ids == [None, None, step]
        assert [e.seq for e in after] == [len(ids) + 1]


async def _read_up_to(reader: Any, run_id: str, seq: int, within: float = 10.0) -> list[Any]:
    """The run's events as ``reader`` reads them once they reach ``seq`` (an acknowledged
    append's), read again while a lagging replica answers with fewer, for up to ``within``
    seconds; then the last read, for the assertion to show."""
    deadline = time.monotonic() + within
    while True:
        events = list(await reader.list_events(run_id))
        if len(events) >= seq or time.monotonic() > deadline:
            return events
        await asyncio.sleep(0.05)


async def test_two_processes_batching_the_same_runs_each_run_has_one_winner(
    open_nats_world: OpenWorlds,
) -> None:
    """Both processes gather appends to the same runs, each expecting seq 2: the batch stored
    first wins every run it holds, the other process's batch is refused whole (10071) and each
    of its appends, published again alone, fails as a stale expectation. Exactly one writer
    wins each run, and its step is the only one stored."""
    first = await open_nats_world(gather_appends=2)
    second = await open_nats_world(gather_appends=2)
    run_ids = await _runs(first, 12, "gather-two-writers")
    for run_id in run_ids:  # the second process knows the runs as far as seq 2
        assert len(await second.list_events(run_id)) == 2
    results = await asyncio.gather(
        *_steps(first, run_ids, "gather-two-first"),
        *_steps(second, run_ids, "gather-two-second"),
        return_exceptions=True,
    )
    mine, theirs = results[: len(run_ids)], results[len(run_ids) :]
    assert first._log.gather.batches + second._log.gather.batches >= 1
    reader = await open_nats_world()
    for run_id, a, b in zip(run_ids, mine, theirs, strict=True):
        outcomes = sorted(type(r).__name__ for r in (a, b))
        assert outcomes == ["SequenceConflictError", "list"], (a, b)
        winner = "gather-two-first" if isinstance(a, list) else "gather-two-second"
        won = a if isinstance(a, list) else b
        assert [e.seq for e in won] == [3]
        events = await reader.list_events(run_id)
        assert [e.correlation_id for e in events] == [None, None, f"{winner}-{run_id}"]
        lost = b if isinstance(a, list) else a
        assert isinstance(lost, SequenceConflictError)


@pytest.mark.parametrize("cut_after", ["first", "commit"])
async def test_a_server_killed_in_the_middle_of_a_batch_stores_each_append_at_most_once(
    open_own_world: OpenWorlds,
    nats_server_own: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    cut_after: str,
) -> None:
    """The server is killed after the batch's first message, or after its commit, was written
    to the socket, and started again. A run whose append was answered has it stored once at the
    answered sequence; one whose append failed (the world unavailable) has nothing or that one
    step; no run has it twice, and every run takes its next append."""
    world = await open_own_world(gather_appends=2, request_timeout=2.0)
    run_ids = await _runs(world, 10, f"gather-cut-{cut_after}")
    real = wire.publish
    cut: list[asyncio.Task[None]] = []

    async def publish(nc: Any, subject: str, payload: bytes = b"", **kw: Any) -> None:
        await real(nc, subject, payload, **kw)
        headers = kw.get("headers") or {}
        mark = "Nats-Batch-Commit" if cut_after == "commit" else "Nats-Batch-Sequence"
        if not cut and mark in headers:
            nats_server_own.kill()
            cut.append(asyncio.create_task(asyncio.to_thread(nats_server_own.start)))

    monkeypatch.setattr(wire, "publish", publish)
    results = await asyncio.wait_for(
        asyncio.gather(*_steps(world, run_ids, f"gather-cut-{cut_after}"), return_exceptions=True),
        timeout=60,
    )
    monkeypatch.setattr(wire, "publish", real)
    assert cut, "no batch was sent"
    await cut[0]
    assert world._log.gather.refused >= 1
    reader = await open_own_world()
    await _stored_at_most_once(world, reader, run_ids, results, f"gather-cut-{cut_after}")


@pytest.mark.parametrize("value", ["2", "many", 2.5, None, -1, [2]])
async def test_a_bad_gather_appends_is_a_clear_configuration_error(value: Any) -> None:
    """Only a whole number of 0 or more, or a bool, is taken; anything else is refused when the
    world is made, naming the option, instead of a ValueError or TypeError from int() or a
    fraction quietly cut to a whole number."""
    with pytest.raises(ConfigurationError, match="gather_appends"):
        NatsWorld("nats://127.0.0.1:4222", gather_appends=value)


@pytest.mark.parametrize("query", ["gather_appends=many", "gather_appends=1.5"])
async def test_a_bad_gather_appends_in_the_url_is_a_clear_configuration_error(
    query: str,
) -> None:
    from wayline.worlds.nats.options import parse_url

    with pytest.raises(ConfigurationError, match="gather_appends"):
        parse_url(f"nats://127.0.0.1:4222?{query}")


@pytest.mark.parametrize("value", [True, False, 0, 1, 3])
async def test_good_gather_appends_values_are_taken(value: Any) -> None:
    world = NatsWorld("nats://127.0.0.1:4222", gather_appends=value)
    assert world._gather_appends == int(value)
    assert gather.MIN_BATCH == 16


@pytest.mark.slow
@pytest.mark.parametrize("step_down_after", ["first", "commit"])
async def test_a_leader_change_in_the_middle_of_a_batch_stores_each_append_at_most_once(
    nats_cluster: NatsCluster, monkeypatch: pytest.MonkeyPatch, step_down_after: str
) -> None:
    """On three nodes with replicas=3, the events stream's leader is asked to step down once
    the batch's first message, or its commit, was written: the batch is stored whole by the
    old leader or dropped, and each append is then answered or refused on its own, stored at
    most once, at the answered sequence when it was answered."""
    prefix = f"gl{step_down_after[0]}{time.monotonic_ns() % 10**9}"
    world = NatsWorld(nats_cluster.urls, prefix=prefix, replicas=3, gather_appends=2)
    reader = NatsWorld(nats_cluster.urls, prefix=prefix, replicas=3)
    await world.start()
    await reader.start()
    try:
        run_ids = await _runs(world, 10, f"gather-leader-{step_down_after}")
        stream = world.names.events_stream
        leader = (await world._js.stream_info(stream)).cluster.leader
        real = wire.publish
        stepped: list[bool] = []

        async def publish(nc: Any, subject: str, payload: bytes = b"", **kw: Any) -> None:
            await real(nc, subject, payload, **kw)
            headers = kw.get("headers") or {}
            mark = "Nats-Batch-Commit" if step_down_after == "commit" else "Nats-Batch-Sequence"
            if not stepped and mark in headers:
                stepped.append(True)
                await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=10)

        monkeypatch.setattr(wire, "publish", publish)
        name = f"gather-leader-{step_down_after}"
        results = await asyncio.wait_for(
            asyncio.gather(*_steps(world, run_ids, name), return_exceptions=True), timeout=90
        )
        monkeypatch.setattr(wire, "publish", real)
        assert stepped, "no batch was sent"
        for _ in range(100):  # the new leader is elected (a stream info may time out then)
            with contextlib.suppress(nats.errors.TimeoutError):
                info = await world._js.stream_info(stream)
                if info.cluster.leader not in (None, leader):
                    break
            await asyncio.sleep(0.1)
        await _stored_at_most_once(world, reader, run_ids, results, name)
    finally:
        await reader.close()
        await world.close()
