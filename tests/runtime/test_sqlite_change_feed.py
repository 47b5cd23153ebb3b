"""The SQLite world's change feed (``run_feed``): a step's append leaves it alone unless someone
follows every append (``World.watch_runs``), an append that changes a run's status renumbers
it, a follower hears every append, and a dead process's follow is dropped. SQLite only: the
feed table is the embedded world's own (the NATS world's feed is its stream's republish)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import wayline
from tests.runtime import flows
from tests.runtime.harness import settings, wait_for
from wayline._core.events import EventType as T
from wayline._core.events import NewEvent
from wayline._core.ids import new_run_id
from wayline.worlds.local import LocalWorld
from wayline.worlds.local.holders import HOST


def _feed_writes(statements: list[str]) -> int:
    return sum("INTO run_feed" in s for s in statements)


async def _run_traced(world: LocalWorld, steps: int) -> tuple[str, list[str]]:
    client = wayline.Client(world)
    async with wayline.Worker(world, [flows.chain], settings=settings()):
        await (await client.start(flows.chain, 1)).result(timeout=30)
        traced: list[str] = []
        assert world._db is not None
        world._db.set_trace_callback(traced.append)
        handle = await client.start(flows.chain, steps)
        assert await handle.result(timeout=30) == sum(range(steps))
        world._db.set_trace_callback(None)
    return handle.run_id, traced


async def test_a_step_leaves_the_feed_alone_while_nobody_follows_every_append(
    tmp_path: Path,
) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        run_id, traced = await _run_traced(world, 10)
        events = await world.list_events(run_id)
    assert [e.type for e in events].count(T.STEP_COMPLETED) == 10
    # the run's status changes three times (created, started, completed); its ten steps'
    # appends leave it as it was and write nothing to the feed
    assert _feed_writes(traced) <= 3, [s for s in traced if "run_feed" in s]


async def test_a_follower_of_every_append_has_each_step_renumber_the_feed(tmp_path: Path) -> None:
    async with LocalWorld(tmp_path / "w.db", poll_interval=0.01) as world:
        heard: list[str] = []
        watch = await world.watch_runs(heard.append)
        assert watch is not None
        run_id, traced = await _run_traced(world, 10)
        await wait_for(lambda: asyncio.sleep(0, run_id in heard or None), timeout=10)
        await watch.close()
        assert _feed_writes(traced) >= 10  # every append of the ten steps
        assert world._db is not None
        assert world._db.execute("SELECT COUNT(*) FROM feed_followers").fetchone()[0] == 0


async def test_a_follower_hears_an_append_that_leaves_the_status_as_it_was(
    tmp_path: Path,
) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db, poll_interval=0.01) as watcher, LocalWorld(db) as writer:
        run_id = new_run_id()
        created = NewEvent(T.RUN_CREATED, data={"workflow": "w", "input": {"args": []}})
        await writer.append(run_id, [created, NewEvent(T.RUN_STARTED)])
        heard: list[str] = []
        watch = await watcher.watch_runs(heard.append)
        assert watch is not None
        step = NewEvent(T.STEP_CREATED, "s1", {"stepName": "a", "input": []})
        await writer.append(run_id, [step])
        await wait_for(lambda: asyncio.sleep(0, run_id in heard or None), timeout=10)
        await watch.close()


async def test_a_dead_process_follow_is_dropped_when_a_world_opens(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    async with LocalWorld(db):
        pass
    dead = f"{HOST}:{2**22 + 7}:1"  # above the largest pid Linux hands out by default
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO feed_followers VALUES (?, ?)", (f"{dead}:x", dead))
    async with LocalWorld(db) as world:
        assert world._db is not None
        assert world._db.execute("SELECT COUNT(*) FROM feed_followers").fetchone()[0] == 0
