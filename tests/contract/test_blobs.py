"""World contract: the blob port (``wayline.world.ports.blobs``). A blob comes back byte for
byte, whole and in chunks; one the store does not hold is a typed error, never a crash; a
run's blobs go with it at cleanup; a run's large output is found as the blob it is stored in."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import WorldFactory
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.errors import BlobMissingError
from wayline.world import World
from wayline.world.ports.blobs import BlobRef, digest_of

_DATA = bytes(range(256)) * 1000  # 256,000 bytes, every byte value: nothing is decoded


async def _ended_run(world: World, output: object) -> str:
    run_id = new_run_id()
    await world.append(
        run_id,
        [NewEvent(T.RUN_CREATED, data={"workflow": "blob-contract", "input": None})],
    )
    await world.append(run_id, [NewEvent(T.RUN_STARTED)])
    await world.append(run_id, [NewEvent(T.RUN_COMPLETED, data={"output": output})])
    return run_id


async def test_a_blob_comes_back_byte_for_byte_whole_and_in_chunks(world: World) -> None:
    run_id = await _ended_run(world, 1)
    ref = await world.put_blob(run_id, _DATA)
    assert ref.digest == digest_of(_DATA) and ref.size == len(_DATA)
    assert await world.put_blob(run_id, _DATA) == ref  # the same bytes again: a no-op
    assert await world.get_blob(run_id, ref) == _DATA
    chunks = [c async for c in world.blob_chunks(run_id, ref, 10_000)]
    assert b"".join(chunks) == _DATA
    assert max(len(c) for c in chunks) <= 10_000 and len(chunks) >= 26


async def test_a_blob_the_store_does_not_hold_is_a_typed_error(world: World) -> None:
    run_id = await _ended_run(world, 1)
    absent = BlobRef(digest_of(b"never stored"), 12)
    assert await world.get_blob(run_id, absent) is None
    with pytest.raises(BlobMissingError, match="no blob") as caught:
        async for _ in world.blob_chunks(run_id, BlobRef(absent.digest, 12, seq=3)):
            pass
    assert caught.value.code == "CORRUPT_LOG" and caught.value.seq == 3


async def test_cleanup_deletes_a_runs_blobs_with_it(world: World) -> None:
    ended = await _ended_run(world, 1)
    live = new_run_id()
    await world.append(live, [NewEvent(T.RUN_CREATED, data={"workflow": "blob-contract"})])
    gone = await world.put_blob(ended, _DATA)
    kept = await world.put_blob(live, b"kept")
    assert await world.delete_runs(older_than=0) == 1
    assert await world.get_blob(ended, gone) is None
    assert await world.get_blob(live, kept) == b"kept"  # a live run keeps its blobs


async def test_a_large_output_is_found_as_its_blob(world: World) -> None:
    output = "y" * 300_000  # over the default inline threshold (256 KiB)
    run_id = await _ended_run(world, output)
    ref = await world.payload_blob(run_id, "output")
    assert await world.payload_blob(run_id, "input") is None  # small: inline
    stored = json.dumps(output, separators=(",", ":")).encode()
    if ref is None:  # a world that keeps every payload inline (the memory world)
        assert type(world).__name__ == "MemoryWorld"
    else:
        assert ref.size == len(stored) and ref.seq == 3  # the run_completed names it
        assert b"".join([c async for c in world.blob_chunks(run_id, ref)]) == stored
    assert (await world.get_run(run_id)).output == output  # type: ignore[union-attr]


async def test_a_run_and_its_log_as_stored_keep_a_large_value_as_its_reference(
    world: World,
) -> None:
    output = "z" * 300_000  # over the default inline threshold (256 KiB)
    run_id = await _ended_run(world, output)
    info, events = await world.stored_run(run_id), await world.stored_events(run_id)
    assert info is not None and [e.seq for e in events] == [1, 2, 3]
    assert [e.seq for e in await world.stored_events(run_id, after_seq=2)] == [3]
    assert await world.stored_run(new_run_id()) is None
    assert await world.stored_events(new_run_id()) == []
    ref = await world.payload_blob(run_id, "output")
    if ref is None:  # a world that keeps every payload inline: as stored is as read
        assert info.output == output and events[-1].data["output"] == output
        return
    stored = {"$wayline.blob": ref.digest, "bytes": ref.size}
    for found in (info.output, events[-1].data["output"]):
        assert {k: found[k] for k in stored} == stored  # the reference, not the value
    assert (await world.list_events(run_id))[-1].data["output"] == output  # read: the value


async def test_cleanup_deletes_a_blob_of_no_run_after_the_orphan_grace(
    make_world: WorldFactory,
) -> None:
    world = await make_world(orphan_grace_seconds=0.5)
    orphan = new_run_id()  # no run: the start that would have named it never appended
    ref = await world.put_blob(orphan, _DATA)
    await world.delete_runs(older_than=0)
    assert await world.get_blob(orphan, ref) == _DATA  # maybe a start in flight: kept
    await asyncio.sleep(0.7)
    await world.delete_runs(older_than=0)
    assert await world.get_blob(orphan, ref) is None
