"""Streaming a blob out of a SQLite world: the stream's own read-only connection opens a world
whose path holds characters a URI gives meaning to, and a reader that stalls between chunks
holds no read transaction, so the WAL is checkpointed under it as under no reader at all."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.local import LocalWorld

BIG = 400 * 1024
"""An input over the default inline threshold (256 KiB), so it is stored as a blob."""


async def _run_with_a_blob(world: LocalWorld, filler: str) -> tuple[str, str]:
    run_id = new_run_id()
    value = filler * BIG
    data = {"workflow": "local-blob-streams", "input": value}
    await world.append(run_id, [NewEvent(T.RUN_CREATED, data=data)])
    return run_id, value


@pytest.mark.parametrize("folder", ["a#b", "a?b", "a%20b", "a%b"])
async def test_a_blob_streams_from_a_world_whose_path_has_uri_characters(
    tmp_path: Path, folder: str
) -> None:
    async with LocalWorld(tmp_path / folder / "w.db") as world:
        run_id, value = await _run_with_a_blob(world, "h")
        ref = await world.payload_blob(run_id, "input")
        assert ref is not None
        body = b"".join([c async for c in world.blob_chunks(run_id, ref)])
        assert len(body) == ref.size and body == f'"{value}"'.encode()


async def test_a_stalled_blob_reader_does_not_hold_back_the_wal_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.db"
    async with LocalWorld(path) as world:
        run_id, value = await _run_with_a_blob(world, "b")
        ref = await world.payload_blob(run_id, "input")
        assert ref is not None
        stream = world.blob_chunks(run_id, ref, 64 * 1024)
        first = await anext(stream)  # a client that takes one chunk and then stalls
        for n in range(200):
            await world.enqueue("local-blob-streams", {"n": n, "pad": "x" * 2000})
        db = sqlite3.connect(path)
        try:
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            db.close()
        assert busy == 0, "a reader waiting between chunks keeps the WAL from being checkpointed"
        # the stalled reader then goes on, and still gets the blob whole
        rest = b"".join([c async for c in stream])
        assert first + rest == f'"{value}"'.encode()
