"""The change feed (``World.watch_runs``), on every world: a watcher hears of appends made
through another world instance on the same store (another process, in a cluster), a run
name that needs encoding included, and nothing after it closes. A terminal append also wakes
whoever watches the run's end (``on_ended`` feeds the terminal hints)."""

from __future__ import annotations

import asyncio

from tests.conftest import WorldFactory
from tests.runtime.harness import wait_for
from wayline._core.events import EventType, NewEvent
from wayline._core.ids import new_run_id
from wayline.world import World
from wayline.world.terminal_hints import TerminalHints


def _created() -> list[NewEvent]:
    return [NewEvent(EventType.RUN_CREATED, data={"workflow": "w", "input": {"args": []}})]


async def test_a_watcher_hears_every_writers_appends(make_world: WorldFactory) -> None:
    watcher, writer = await make_world(), await make_world()
    heard: list[str] = []
    watch = await watcher.watch_runs(heard.append)
    assert watch is not None
    plain, odd = new_run_id(), "run with spaces/and.dots " + new_run_id()
    for run_id in (plain, odd):
        await writer.append(run_id, _created())
        await writer.append(run_id, [NewEvent(EventType.RUN_STARTED)])

    await wait_for(lambda: asyncio.sleep(0, {plain, odd} <= set(heard) or None), timeout=10)
    await watch.close()
    quiet = new_run_id()
    await writer.append(quiet, _created())
    await asyncio.sleep(0.5)  # time enough to hear it, were the watch still open
    assert quiet not in heard


async def test_a_watch_starts_at_now(make_world: WorldFactory) -> None:
    """Appends before the watch began are not replayed: the watcher reads the runs it cares
    about after it starts watching (the operator's initial sync)."""
    watcher, writer = await make_world(), await make_world()
    old = new_run_id()
    await writer.append(old, _created())
    await asyncio.sleep(0.3)  # the append's notice has reached the watcher's process
    heard: list[str] = []
    watch = await watcher.watch_runs(heard.append)
    assert watch is not None
    new = new_run_id()
    await writer.append(new, _created())
    await wait_for(lambda: asyncio.sleep(0, new in heard or None), timeout=10)
    assert old not in heard
    await watch.close()


async def _new_run(world: World) -> str:
    run_id = new_run_id()
    await world.append(run_id, _created(), expected_seq=0)
    return run_id


async def test_a_terminal_append_wakes_whoever_watches_the_run(make_world: WorldFactory) -> None:
    """A terminal hints' ``watch`` is set by a terminal append (this instance's, and on a world with
    ``terminal_hints`` another instance's too), never by a run's other events."""
    world = await make_world()
    other = await make_world() if world.terminal_hints else world
    run_id = await _new_run(world)
    quiet = await _new_run(world)
    hints = TerminalHints.of(world)
    ended = hints.watch(run_id)
    unrelated = hints.watch(quiet)
    await other.append(run_id, [NewEvent(EventType.RUN_STARTED)])
    await other.append(quiet, [NewEvent(EventType.RUN_STARTED)])
    await asyncio.sleep(0.2)
    assert not ended.done()  # a non-terminal event is no hint
    await other.append(run_id, [NewEvent(EventType.RUN_COMPLETED, data={"output": 1})])
    await asyncio.wait_for(ended, 5)
    assert not unrelated.done()
    hints.unwatch(run_id, ended)
    hints.unwatch(quiet, unrelated)
    assert not hints.waited()  # nothing left behind
