"""Appends of concurrent runs are stored as one JetStream atomic batch (``gather.py``), and a
batch the server refuses is published again append by append, so each run gets its own
answer. On a real nats-server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.nats_fixtures import NatsCluster, OpenWorlds, stored_headers
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import ConfigurationError, SequenceConflictError
from wayline.worlds.nats import NatsWorld, gather


async def _runs(world: Any, count: int, workflow: str) -> list[str]:
    out = []
    for _ in range(count):
        run_id = new_run_id()
        await world.append(run_id, [NewEvent(T.RUN_CREATED, data={"workflow": workflow})])
        await world.append(run_id, [NewEvent(T.RUN_STARTED)])
        out.append(run_id)
    return out


async def _step_everywhere(
    world: Any, run_ids: list[str], expected: int | None, name: str
) -> list[Any]:
    return list(
        await asyncio.gather(
            *(
                world.append(
                    r, [NewEvent(T.STEP_CREATED, f"{name}-{r}", {})], expected_seq=expected
                )
                for r in run_ids
            ),
            return_exceptions=True,
        )
    )


async def test_appends_of_concurrent_runs_are_stored_as_one_atomic_batch(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(gather_appends=1)
    run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-one-batch")
    results = await _step_everywhere(world, run_ids, 2, "gather-one-batch-step")
    assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in results), results
    batch_ids = [(await stored_headers(world, r))[-1].get("Nats-Batch-Id") for r in run_ids]
    gathered = [b for b in batch_ids if b is not None]
    # the first append of the turn goes at once, on its own; the others wait for its end
    assert len(gathered) >= gather.MIN_BATCH and len(set(gathered)) == 1, batch_ids
    other = await open_nats_world()
    for run_id, result in zip(run_ids, results, strict=True):
        events = await other.list_events(run_id)
        assert [(e.seq, e.type) for e in events][-1] == (3, T.STEP_CREATED)
        assert events[-1].created_at == result[0].created_at  # each its own stamp


async def test_a_stale_expectation_in_a_batch_fails_only_that_run(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(gather_appends=1)
    other = await open_nats_world()
    run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-stale")
    stale, moved = run_ids[-1], run_ids[-2]
    for run_id in (stale, moved):  # another process moves them: this one's view is behind
        await other.append(run_id, [NewEvent(T.STEP_CREATED, f"other-{run_id}", {})])
    refused = world._log.gather.refused
    results = await asyncio.gather(
        *(
            world.append(
                r, [NewEvent(T.STEP_CREATED, f"gather-stale-step-{r}", {})], expected_seq=2
            )
            for r in run_ids[:-2]
        ),
        world.append(moved, [NewEvent(T.STEP_CREATED, f"gather-stale-moved-{moved}", {})]),
        world.append(
            stale, [NewEvent(T.STEP_CREATED, f"gather-stale-step-{stale}", {})], expected_seq=2
        ),
        return_exceptions=True,
    )
    # the batch was tried and refused (its 10071 names no message), then each went alone
    assert world._log.gather.refused == refused + 1
    assert isinstance(results[-1], SequenceConflictError), results[-1]
    assert "at seq 3" in str(results[-1])
    assert [[e.seq for e in r] for r in results[:-2]] == [[3]] * (len(run_ids) - 2), results
    assert [e.seq for e in results[-2]] == [4]  # no expectation: validated again, then stored
    for run_id in run_ids[:-2]:
        events = await other.list_events(run_id)
        assert [e.correlation_id for e in events][-1] == f"gather-stale-step-{run_id}"
    events = await other.list_events(stale)
    assert [e.correlation_id for e in events] == [None, None, f"other-{stale}"]


async def test_a_stream_that_refuses_atomic_batches_gets_appends_one_by_one(
    open_nats_world: OpenWorlds,
) -> None:
    world = await open_nats_world(gather_appends=1)
    run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-refusing")
    info = await world._js.stream_info(world.names.events_stream)
    config = info.config
    config.allow_atomic = False  # as a stream provisioned before batches, or edited since
    await world._js.update_stream(config)
    results = await _step_everywhere(world, run_ids, 2, "gather-refusing-step")
    assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in results), results
    assert world._log.gather.enabled is False
    assert world._log.gather.refused == 1
    # a world started on it again turns atomic batches on (provisioning updates the stream)
    again = await open_nats_world()
    info = await again._js.stream_info(again.names.events_stream)
    assert info.config.allow_atomic is True


@pytest.mark.parametrize("options", [{}, {"gather_appends": 0}])
async def test_gathering_is_off_unless_asked(
    open_nats_world: OpenWorlds, options: dict[str, int]
) -> None:
    world = await open_nats_world(**options)
    run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-off")
    results = await _step_everywhere(world, run_ids, 2, "gather-off-step")
    assert all(isinstance(r, list) for r in results), results
    assert world._log.gather.batches == 0
    for run_id in run_ids:
        assert all("Nats-Batch-Id" not in h for h in await stored_headers(world, run_id))


@pytest.mark.slow
async def test_a_batch_is_stored_on_three_replicas(nats_cluster: NatsCluster) -> None:
    prefix = f"gb{time.monotonic_ns() % 10**9}"
    world = NatsWorld(nats_cluster.urls, prefix=prefix, replicas=3, gather_appends=1)
    other = NatsWorld(nats_cluster.urls, prefix=prefix, replicas=3)
    await world.start()
    await other.start()
    try:
        run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-replicas")
        stale = run_ids[-1]
        await other.append(stale, [NewEvent(T.STEP_CREATED, f"other-{stale}", {})])
        results = await _step_everywhere(world, run_ids[:-1], 2, "gather-replicas-step")
        assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in results), results
        batch_ids = [(await stored_headers(world, r))[-1].get("Nats-Batch-Id") for r in run_ids]
        assert len([b for b in batch_ids if b is not None]) >= gather.MIN_BATCH - 1, batch_ids
        # the last run holds other's event at 3 and world's view of it still ends at 2: an
        # expectation of 3 is stale on the server only after other appends once more
        await other.append(stale, [NewEvent(T.STEP_CREATED, f"other-again-{stale}", {})])
        results = await _step_everywhere(world, run_ids, 3, "gather-replicas-again")
        assert isinstance(results[-1], SequenceConflictError), results[-1]
        assert all(isinstance(r, list) and [e.seq for e in r] == [4] for r in results[:-1])
    finally:
        await other.close()
        await world.close()


async def test_a_batch_whose_answer_is_lost_is_found_message_by_message(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nats.errors

    world = await open_nats_world(gather_appends=1)
    run_ids = await _runs(world, gather.MIN_BATCH + 2, "gather-lost")
    real = gather.publish_batch
    stored: list[int] = []

    async def stored_then_lost(nc: Any, messages: Any, timeout: float) -> int:
        stored.append(await real(nc, messages, timeout))
        raise nats.errors.TimeoutError  # the batch is in; its answer never came

    monkeypatch.setattr(gather, "publish_batch", stored_then_lost)
    results = await _step_everywhere(world, run_ids, 2, "gather-lost-step")
    assert len(stored) == 1 and world._log.gather.refused == 1
    # each append, published again under its own message id, finds the batch's message
    assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in results), results
    other = await open_nats_world()
    for run_id in run_ids:
        events = await other.list_events(run_id)
        assert [e.seq for e in events] == [1, 2, 3]  # written once
        assert events[-1].correlation_id == f"gather-lost-step-{run_id}"


@pytest.mark.parametrize("turns", [0, 1, 2, 4])
async def test_a_cancelled_append_leaves_the_others_of_its_batch_answered(
    open_nats_world: OpenWorlds, turns: int
) -> None:
    """The first append that waits for the turn's end sends the batch for all of them: cancelled
    before, while or after it does, the others still get their answers."""
    world = await open_nats_world(gather_appends=1)
    run_ids = await _runs(world, gather.MIN_BATCH + 2, f"gather-cancel-{turns}")
    tasks = [
        asyncio.create_task(
            world.append(r, [NewEvent(T.STEP_CREATED, f"gather-cancel-{r}", {})], expected_seq=2)
        )
        for r in run_ids
    ]
    for _ in range(turns):
        await asyncio.sleep(0)
    tasks[1].cancel()  # the first one to wait: the batch's sender
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=30)
    assert isinstance(results[1], (asyncio.CancelledError, list)), results[1]
    others = results[:1] + results[2:]
    assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in others), others


async def test_gather_appends_above_one_sets_the_fewest_appends_of_a_batch(
    open_nats_world: OpenWorlds, nats_world_factory: Any
) -> None:
    world = await open_nats_world(gather_appends=3)
    run_ids = await _runs(world, 5, "gather-three")
    results = await _step_everywhere(world, run_ids, 2, "gather-three-step")
    assert all(isinstance(r, list) and [e.seq for e in r] == [3] for r in results), results
    assert world._log.gather.batches == 1  # the four after the first of the turn
    with pytest.raises(ConfigurationError, match="gather_appends"):
        await nats_world_factory(gather_appends=-1)
