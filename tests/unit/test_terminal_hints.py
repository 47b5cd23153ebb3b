"""The terminal hints above the seam (``world.terminal_hints``): bounded, newest kept, fed by
the world through ``on_ended`` alone (pure bookkeeping, no server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from wayline.world import seam
from wayline.world.terminal_hints import HEARD_ENDED, TerminalHints


class _Hinted(seam.World):
    """Only the feeding of ends is exercised; the log and queue are never called."""


_Hinted.__abstractmethods__ = frozenset()


def test_the_hints_remember_a_bounded_number_of_ended_runs() -> None:
    world = _Hinted()
    hints = TerminalHints.of(world)
    for i in range(HEARD_ENDED + 10):
        world._wake_terminal(f"r{i}")
    assert not hints.heard_ended("r0")
    assert not hints.heard_ended("r9")
    assert hints.heard_ended("r10")
    assert hints.heard_ended(f"r{HEARD_ENDED + 9}")
    assert len(hints._heard) == HEARD_ENDED


def test_a_hint_heard_again_is_kept_as_the_newest() -> None:
    world = _Hinted()
    hints = TerminalHints.of(world)
    world._wake_terminal("old")
    for i in range(HEARD_ENDED - 1):
        world._wake_terminal(f"r{i}")
    world._wake_terminal("old")  # heard again: moves to the newest end
    world._wake_terminal("new")
    assert hints.heard_ended("old")
    assert not hints.heard_ended("r0")


async def test_every_client_of_a_world_shares_its_hints_and_the_world_only_feeds_them() -> None:
    """The world keeps no bookkeeping of its own: it tells each listener of an end, and of a
    hint that may have been lost; one book serves every client of a world."""
    import wayline

    world = _Hinted()
    first, second = wayline.Client(world), wayline.Client(world)
    assert first.ends is second.ends is TerminalHints.of(world)
    heard: list[str] = []

    class _Listener:
        def ended(self, run_id: str) -> None:
            heard.append(run_id)

        def may_be_lost(self) -> None:
            heard.append("lost")

        def waited(self) -> set[str]:
            return {"waited"}

    stop = world.on_ended(_Listener())
    waiter = first.ends.watch("r1")
    assert world._waited_ends() == {"r1", "waited"}
    world._wake_terminal("r1")
    await asyncio.wait_for(waiter, 1)
    lost = first.ends.watch("r2")
    world._hints_may_be_lost()
    await asyncio.wait_for(lost, 1)
    first.ends.unwatch("r2", lost)
    stop()
    world._wake_terminal("r3")
    assert heard == ["r1", "lost"]
    assert first.ends.heard_ended("r3") and not first.ends.waited()


async def test_the_worlds_old_hint_methods_still_work_and_say_they_are_deprecated() -> None:
    world = _Hinted()
    with pytest.warns(DeprecationWarning, match="World.watch_terminal is deprecated"):
        fut = world.watch_terminal("r1")
    world._wake_terminal("r1")
    await asyncio.wait_for(fut, 1)
    with pytest.warns(DeprecationWarning, match="World.heard_ended is deprecated"):
        assert world.heard_ended("r1")
    with pytest.warns(DeprecationWarning, match="World.ends_mark is deprecated"):
        mark = world.ends_mark()
    with pytest.warns(DeprecationWarning, match="World.may_have_ended_since is deprecated"):
        assert not world.may_have_ended_since("r2", mark)
    with pytest.warns(DeprecationWarning, match="World.unwatch_terminal is deprecated"):
        world.unwatch_terminal("r1", fut)


def _paced(
    monkeypatch: Any, answers: list[list[tuple[int, str, str | None]]]
) -> tuple[Any, list[float], Any]:
    """``feed.asyncio.sleep`` recording its pauses without waiting, a read of the feed that
    answers ``answers`` in turn (nothing once they are spent), and the real ``sleep`` for
    the test's own turns of the loop."""
    import asyncio

    from wayline.worlds.local import feed

    pauses: list[float] = []
    real_sleep = asyncio.sleep

    def read(sql: str, params: Any) -> list[Any]:
        if "MAX(gseq)" in sql:
            return [(0,)]
        return answers.pop(0) if answers else []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(feed.asyncio, "sleep", sleep)
    return read, pauses, real_sleep


async def test_the_feed_of_ends_slows_down_while_nothing_is_appended(
    monkeypatch: Any,
) -> None:
    """``feed.Ends`` reads the change feed every 3 ms while runs move, doubles its pause on
    each read that finds nothing appended (up to 50 ms: a wait on a run that takes hours does
    not read 300 times a second), is quick again as soon as something is, and wakes only the
    waited-for runs whose status is terminal."""
    from wayline.worlds.local import feed

    read, pauses, real_sleep = _paced(
        monkeypatch,
        [
            *([[]] * 6),
            [(1, "a", "running"), (2, "b", "completed")],
            [],
            [(3, "a", "completed"), (4, "c", "failed")],
        ],
    )
    heard: list[str] = []
    waited = {"a", "b"}
    ends = feed.Ends(read, lambda: set() if "a" in heard else waited, heard.append, ["completed"])
    ends.wanted()
    for _ in range(100):
        if "a" in heard:
            break
        await real_sleep(0)
    await ends.close()
    assert pauses[:9] == [0.003, 0.006, 0.012, 0.024, 0.048, 0.05, 0.05, 0.003, 0.006], pauses
    assert heard == ["b", "a"]  # c is not waited for, a's first row was not an end


async def test_rows_this_process_wrote_let_the_feed_of_ends_slow_down(monkeypatch: Any) -> None:
    """A row of the feed this process wrote (``Ends.written``) was an end that woke its
    waiters as it was appended: finding it is no reason to read again soon. Only another
    process's row brings the quick pace back."""
    from wayline.worlds.local import feed

    read, pauses, real_sleep = _paced(
        monkeypatch,
        [[], [(1, "a", "completed")], [(2, "b", "running")], []],
    )
    ends = feed.Ends(read, lambda: {"x"}, lambda run_id: None, ["completed"])
    ends.written([1])
    ends.wanted()
    for _ in range(100):
        if len(pauses) >= 5:
            break
        await real_sleep(0)
    await ends.close()
    assert pauses[:5] == [0.003, 0.006, 0.012, 0.003, 0.006], pauses
