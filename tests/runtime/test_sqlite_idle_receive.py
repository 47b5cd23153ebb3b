"""An idle receive of the SQLite world: its receivers in one process share one look per poll
interval for other processes' commits, a cheap ``PRAGMA data_version``, instead of each
reading the queue every interval; a message queued by another process, or made due by a jump
of the test clock, still ends the wait. SQLite only: statements and processes of one file are
the embedded world's own (the NATS world's receive is a pull the server answers)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

from wayline._core import clock
from wayline.worlds.local import LocalWorld

_POLL = 0.01
_WAIT = 1.0
_TOPICS = ("idle-a", "idle-b", "idle-c")


def _connection(world: LocalWorld) -> sqlite3.Connection:
    assert world._db is not None
    return world._db


async def test_idle_receivers_read_the_queue_only_when_woken(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=_POLL) as world:
        traced: list[str] = []
        _connection(world).set_trace_callback(traced.append)
        got = await asyncio.gather(*(world.receive(t, wait_seconds=_WAIT) for t in _TOPICS))
        _connection(world).set_trace_callback(None)
    assert got == [[], [], []]
    queue_reads = [s for s in traced if "FROM messages WHERE topic" in s]
    looks = [s for s in traced if s == "PRAGMA data_version"]
    # Each receiver reads the queue when it begins and when the looker's receive ends (the
    # hand-over); reading it every interval would be a hundred reads a receiver here.
    assert len(queue_reads) <= 6 * len(_TOPICS), len(queue_reads)
    # One look per interval for all three, plus each receiver's baseline before its reads.
    assert len(looks) <= _WAIT / _POLL + 4 * len(_TOPICS), len(looks)


_ENQUEUE = """
import asyncio, sys
from wayline.worlds.local import LocalWorld

async def main() -> None:
    async with LocalWorld(sys.argv[1]) as world:
        await world.enqueue("idle-other", {"from": "another process"})

asyncio.run(main())
"""


async def test_a_message_queued_by_another_process_ends_an_idle_wait(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db, poll_interval=_POLL) as world:
        waiting = asyncio.create_task(world.receive("idle-other", wait_seconds=60))
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ENQUEUE, str(db), stderr=subprocess.PIPE
        )
        _, err = await other.communicate()
        assert other.returncode == 0, err.decode()
        [delivery] = await asyncio.wait_for(waiting, timeout=60)
        assert delivery.payload is not None and delivery.payload["from"] == "another process"
        assert await world.ack(delivery)


async def test_a_jump_of_the_test_clock_ends_an_idle_wait(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=_POLL) as world:
        await world.enqueue("idle-later", {"n": 1}, delay_seconds=3600)
        waiting = asyncio.create_task(world.receive("idle-later", wait_seconds=60))
        await asyncio.sleep(0.1)  # the receive is waiting for a message an hour off
        try:
            clock.advance(3600)
            [delivery] = await asyncio.wait_for(waiting, timeout=60)
        finally:
            clock.reset()
        assert delivery.payload is not None and delivery.payload["n"] == 1
        assert await world.ack(delivery)


async def test_the_look_passes_on_when_the_looking_receive_ends(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db, poll_interval=_POLL) as world:
        first = asyncio.create_task(world.receive("idle-short", wait_seconds=0.3))
        await asyncio.sleep(0.05)  # the first receive is the one looking
        waiting = asyncio.create_task(world.receive("idle-other", wait_seconds=60))
        assert await first == []
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ENQUEUE, str(db), stderr=subprocess.PIPE
        )
        _, err = await other.communicate()
        assert other.returncode == 0, err.decode()
        [delivery] = await asyncio.wait_for(waiting, timeout=60)
        assert await world.ack(delivery)
