"""A world's memory of terminal hints: bounded, newest kept (pure bookkeeping, no server)."""

from __future__ import annotations

from typing import Any

from wayline.world import seam


class _Hinted(seam.World):
    """Only the hint bookkeeping is exercised; the log and queue are never called."""


_Hinted.__abstractmethods__ = frozenset()


def test_a_world_remembers_a_bounded_number_of_ended_runs() -> None:
    world = _Hinted()
    for i in range(seam._HEARD_ENDED + 10):
        world._wake_terminal(f"r{i}")
    assert not world.heard_ended("r0")
    assert not world.heard_ended("r9")
    assert world.heard_ended("r10")
    assert world.heard_ended(f"r{seam._HEARD_ENDED + 9}")
    assert len(world._heard_ended) == seam._HEARD_ENDED


def test_a_hint_heard_again_is_kept_as_the_newest() -> None:
    world = _Hinted()
    world._wake_terminal("old")
    for i in range(seam._HEARD_ENDED - 1):
        world._wake_terminal(f"r{i}")
    world._wake_terminal("old")  # heard again: moves to the newest end
    world._wake_terminal("new")
    assert world.heard_ended("old")
    assert not world.heard_ended("r0")


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
