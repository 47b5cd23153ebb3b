"""A cleanup on JetStream racing workers and starts: a message of a deleted run settled by a
worker while the cleanup sweeps the queue is already gone, which the sweep takes as done; a
hook token claimed by a new run under the deleted run's id is the new run's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import wayline
from tests.nats_fixtures import OpenWorlds, hold_before, hold_sweep
from tests.runtime import flows
from tests.runtime import start_flows as sf
from tests.runtime.harness import wait_for
from wayline._core.ids import new_run_id
from wayline.worlds.nats.queue import Queue


async def test_a_message_acked_while_the_cleanup_sweeps_is_no_error(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    world = await open_nats_world()
    client = wayline.Client(world)
    run_id = new_run_id()
    await client.start_with(
        wayline.StartOptions(run_id=run_id), sf.st_counted, str(tmp_path / "m"), "t"
    )
    assert await client.terminate(run_id)  # ended, its start message still queued
    topic = await world.router.topic("flow", {"runId": run_id})
    [held] = await world.receive(topic, wait_seconds=2)  # a worker holds it
    listed = Queue.stored

    async def acked_meanwhile(self: Queue) -> AsyncIterator[Any]:
        found = [item async for item in listed(self)]
        assert await world.ack(held)  # the worker settles it after the sweep listed it
        for item in found:
            yield item

    monkeypatch.setattr(Queue, "stored", acked_meanwhile)
    assert await world.delete_runs(older_than=0) == 1
    assert await world.get_run(run_id) is None


async def test_a_hook_claimed_by_a_run_started_again_during_its_cleanup_is_kept(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run waiting on hook ``token`` ends; a cleanup deletes it and, after purging its log,
    drops the hook tokens it held. Its id is started again in between and the new run waits
    on the same token: the new run's claim is not the deleted run's and stays, so the hook
    can be resumed (dropped, the token was unknown and the run waited for good)."""
    from wayline.worlds.nats.hook_claims import HookClaims

    world, janitor = await open_nats_world(), await open_nats_world()
    client = wayline.Client(world)
    run_id, token = new_run_id(), f"tok-{new_run_id()}"
    async with wayline.Worker(world, [flows.kid_waits]):
        first = await client.start_with(wayline.StartOptions(run_id=run_id), flows.kid_waits, token)
        await wait_for(lambda: world.get_hook(token))
        await client.resume_hook(token, "old")
        assert await first.result(timeout=10) == "old"
        purged, go_on = hold_before(monkeypatch, HookClaims, "drop_token")
        cleanup = asyncio.ensure_future(janitor.delete_runs(older_than=0))
        await asyncio.wait_for(purged.wait(), 10)
        again = await client.start_with(wayline.StartOptions(run_id=run_id), flows.kid_waits, token)
        assert again._fresh

        async def claimed() -> bool:
            hook = await world.get_hook(token)
            return hook is not None and hook.active

        await wait_for(claimed)
        go_on.set()
        assert await cleanup == 1
        await client.resume_hook(token, "new")
        assert await again.result(timeout=10) == "new"


async def test_a_start_of_a_reused_id_kept_when_a_replica_behind_answers_the_sweeps_read(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A cleanup deletes an ended run; the id is started again after the run's log was
    purged and before the cleanup swept the queue. The sweep keeps a message stored after
    the purge when the run's subject holds a run again; that read is answered by the stream
    leader, which has the new ``run_created`` (acked before its start was sent). Here the
    reads a replica may answer (direct gets) show the subject empty, as a replica behind
    would: the new run's start stays all the same, and the run ends. When the sweep read the
    run with direct gets, it removed that start and the new run stayed pending. (A single
    server cannot show a replica lagging, nor which server answers: the direct reads are made
    to lag here; that the leader alone answers a STREAM.MSG.GET is the server's rule.)"""
    from wayline.worlds.nats import eventlog
    from wayline.worlds.nats.retention import Retention

    world, janitor, other = [await open_nats_world() for _ in range(3)]
    path, run_id = str(tmp_path / "m"), new_run_id()
    async with wayline.Worker(world, sf.WORKFLOWS):  # it ends, its start acked
        first = await wayline.Client(world).start_with(
            wayline.StartOptions(run_id=run_id), sf.st_counted, path, "old"
        )
        assert await first.result(timeout=15) == "old"
    purged, go_on = asyncio.Event(), asyncio.Event()
    subject = janitor.names.run_subject(run_id)
    behind = [False]
    read = eventlog.read_subject

    async def lagging(nc: Any, stream: str, subj: str, *args: Any, **kwargs: Any) -> Any:
        if behind[0] and subj == subject:
            return []  # a replica that has not applied the new run_created yet
        return await read(nc, stream, subj, *args, **kwargs)

    monkeypatch.setattr(eventlog, "read_subject", lagging)
    sweep = Retention._drop_messages

    async def paused(self: Retention, *args: Any) -> None:
        purged.set()
        await go_on.wait()
        behind[0] = True
        try:
            await sweep(self, *args)
        finally:
            behind[0] = False

    monkeypatch.setattr(Retention, "_drop_messages", paused)
    cleanup = asyncio.ensure_future(janitor.delete_runs(older_than=0))
    await asyncio.wait_for(purged.wait(), 10)
    handle = await wayline.Client(other).start_with(
        wayline.StartOptions(run_id=run_id), sf.st_counted, path, "new"
    )
    assert handle._fresh
    go_on.set()
    assert await cleanup == 1
    woken = await other.runs_with_messages()
    assert woken is not None and run_id in woken, "the new run's start was removed"
    async with wayline.Worker(other, sf.WORKFLOWS):
        assert await handle.result(timeout=15) == "new"
    assert sf.lines(path) == ["body old", "body new"]


async def test_a_wake_of_a_deleted_run_sent_during_its_cleanup_is_removed(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A wake of a deleted run sent after its log was purged (a late worker's), with no run
    started again under the id: the stream leader shows the subject empty, and the sweep
    removes the wake."""

    world, janitor = await open_nats_world(), await open_nats_world()
    run_id = new_run_id()
    async with wayline.Worker(world, sf.WORKFLOWS):
        first = await wayline.Client(world).start_with(
            wayline.StartOptions(run_id=run_id), sf.st_counted, str(tmp_path / "m"), "old"
        )
        assert await first.result(timeout=15) == "old"
    purged, go_on = hold_sweep(monkeypatch)
    cleanup = asyncio.ensure_future(janitor.delete_runs(older_than=0))
    await asyncio.wait_for(purged.wait(), 10)
    await world.enqueue("flow", {"runId": run_id, "reason": "late"})
    assert run_id in (await world.runs_with_messages() or ())
    go_on.set()
    assert await cleanup == 1
    left = await world.runs_with_messages()
    assert left is not None and run_id not in left


async def test_an_orphan_blob_renewed_after_the_cleanup_listed_it_is_kept(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob of a run id with no run, older than the orphan grace, is listed by a cleanup;
    a retried start of that id puts the same bytes again before the cleanup deletes it, which
    renews the blob's time. The start's append will name it: the cleanup must leave it."""
    from wayline.worlds.nats.blobs import NatsBlobs

    world = await open_nats_world(orphan_grace_seconds=0.05)
    run_id, data = new_run_id(), b"renewed " * 1000
    ref = await world.put_blob(run_id, data)
    await asyncio.sleep(0.1)  # past the grace: an orphan by its first put's time
    listed = NatsBlobs.stale

    def renewed_after_listing(self: NatsBlobs, cutoff: float) -> dict[str, list[str]]:
        found = listed(self, cutoff)
        assert any(found.values())  # the cleanup took the blob for an old orphan
        renewal = asyncio.get_running_loop().create_task(world.put_blob(run_id, data))
        renewals.append(renewal)
        return found

    renewals: list[asyncio.Task[Any]] = []
    monkeypatch.setattr(NatsBlobs, "stale", renewed_after_listing)
    real_purge = NatsBlobs.purge

    async def purge_after_the_renewal(self: NatsBlobs, rid: str, doomed: list[str]) -> None:
        assert await renewals[0] == ref  # the retried start's put landed first
        await real_purge(self, rid, doomed)

    monkeypatch.setattr(NatsBlobs, "purge", purge_after_the_renewal)
    await world.delete_runs(older_than=0)
    assert renewals and await world.get_blob(run_id, ref) == data


async def test_a_blob_whose_chunks_a_cleanup_purged_after_its_meta_was_read_is_missing(
    open_nats_world: OpenWorlds,
) -> None:
    """A reader that finds the blob's meta but none of its chunks (a cleanup purged them in
    between) gets ``BlobMissingError`` before any byte, which the console answers as a typed
    409, not a ``LookupError`` it would answer with a 500."""
    from wayline.errors import BlobMissingError
    from wayline.worlds.nats.blobs import blob_name

    world = await open_nats_world()
    run_id = new_run_id()
    ref = await world.put_blob(run_id, b'"' + b"x" * 300_000 + b'"')
    store = world._blob_store
    _, info = await store._meta(blob_name(run_id, ref.digest, ref.incarnation))
    await store._js.purge_stream(f"OBJ_{store.bucket}", subject=f"$O.{store.bucket}.C.{info.nuid}")
    with pytest.raises(BlobMissingError):
        await anext(world.blob_chunks(run_id, ref))
