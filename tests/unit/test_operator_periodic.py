"""The operator's own periodic looks (a schedule's tick, a waiting hook's retry), without an
API server: a resource is looked at while the watch shows it, and never once it was seen
deleted, being deleted, or no longer wanted; a failed look is tried again; none while paused."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from tests.runtime.harness import wait_for
from wayline_operator.periodic import Periodic


def _body(uid: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": f"r-{uid}", **meta}}


def _now(check: Callable[[], bool]) -> Callable[[], Any]:
    """A ``wait_for`` predicate from a plain check."""

    async def predicate() -> bool:
        return check()

    return predicate


class Looks:
    def __init__(self, fail_first: int = 0) -> None:
        self.seen: list[str] = []
        self.kept: list[bool] = []
        self.fail_first = fail_first

    async def __call__(self, body: Mapping[str, Any], kept: Callable[[], bool]) -> None:
        self.seen.append(body["metadata"]["uid"])
        self.kept.append(kept())
        if self.fail_first:
            self.fail_first -= 1
            raise RuntimeError("the API server did not answer")


async def test_a_resource_is_looked_at_until_it_is_deleted_and_never_after() -> None:
    looks = Looks()
    periodic = Periodic("tick", 0.05, looks, lambda: False)
    periodic.start()
    try:
        periodic.seen(None, _body("a"), True)  # the initial listing
        periodic.seen("ADDED", _body("b"), True)
        await wait_for(_now(lambda: looks.seen.count("a") >= 2 and looks.seen.count("b") >= 2))
        periodic.seen("MODIFIED", _body("a", deletionTimestamp="2026-01-01T00:00:00Z"), True)
        periodic.seen("DELETED", _body("b"), True)
        assert "a" not in periodic and "b" not in periodic
        after = len(looks.seen)
        periodic.seen("ADDED", _body("c"), True)
        await wait_for(_now(lambda: looks.seen.count("c") >= 3))
        assert set(looks.seen[after:]) == {"c"}
    finally:
        await periodic.close()
    assert all(looks.kept)


async def test_a_resource_no_longer_wanted_leaves_and_a_failed_look_is_tried_again() -> None:
    looks = Looks(fail_first=2)
    periodic = Periodic("redeliver", 0.05, looks, lambda: False)
    periodic.start()
    try:
        periodic.seen("ADDED", _body("w"), True)
        await wait_for(_now(lambda: looks.seen.count("w") >= 3))  # two failed, then one more
        periodic.seen("MODIFIED", _body("w"), False)  # delivered: no longer waiting
        after = len(looks.seen)
        await asyncio.sleep(0.3)  # six intervals
        assert looks.seen[after:] == []
    finally:
        await periodic.close()


async def test_no_look_while_paused() -> None:
    looks = Looks()
    paused = [True]
    periodic = Periodic("tick", 0.05, looks, lambda: paused[0])
    periodic.start()
    try:
        periodic.seen("ADDED", _body("p"), True)
        await asyncio.sleep(0.3)
        assert looks.seen == []
        paused[0] = False
        await wait_for(_now(lambda: bool(looks.seen)))
    finally:
        await periodic.close()


async def test_a_look_under_way_learns_that_its_resource_was_deleted() -> None:
    """A schedule's tick asks ``kept()`` before it creates a run: deleted meanwhile, it
    creates none."""
    started, release = asyncio.Event(), asyncio.Event()
    answers: list[bool] = []

    async def look(body: Mapping[str, Any], kept: Callable[[], bool]) -> None:
        answers.append(kept())
        started.set()
        await release.wait()
        answers.append(kept())

    periodic = Periodic("tick", 0.05, look, lambda: False)
    periodic.start()
    try:
        periodic.seen("ADDED", _body("d"), True)
        await asyncio.wait_for(started.wait(), 10)
        periodic.seen("DELETED", _body("d"), True)
        release.set()
        await wait_for(_now(lambda: len(answers) == 2))
    finally:
        await periodic.close()
    assert answers == [True, False]


async def test_a_paused_loop_waits_instead_of_spinning() -> None:
    """A standby replica keeps its resources, whose looks fall due while it is paused: its
    loop waits up to a second at a time, not zero (it asked ``paused()`` some 70,000 times in
    half a second, a core spent for as long as it stood by)."""
    asked = 0

    def paused() -> bool:
        nonlocal asked
        asked += 1
        return True

    periodic = Periodic("tick", 0.25, Looks(), paused)  # a look due every 0.25 s
    periodic.start()
    try:
        periodic.seen(None, _body("a"), True)
        await asyncio.sleep(1.0)
    finally:
        await periodic.close()
    assert asked <= 8, f"the paused loop went round {asked} times in 1 s"


async def test_a_resource_deleted_while_paused_is_asked_for_and_dropped() -> None:
    """While paused, kopf neither watches nor lists: a resource deleted then sends no event.
    After the pause, one the watch has not shown again is asked for before its next look: a
    gone one is dropped unlooked-at, one still there is looked at as before."""
    looks, pause = Looks(), [False]
    there = {"kept": True, "gone": False}
    asked: list[str] = []

    async def exists(body: Mapping[str, Any]) -> bool:
        uid = body["metadata"]["uid"]
        asked.append(uid)
        return there[uid]

    periodic = Periodic("tick", 0.05, looks, lambda: pause[0], exists)
    periodic.start()
    try:
        periodic.seen(None, _body("kept"), True)
        periodic.seen(None, _body("gone"), True)
        await wait_for(_now(lambda: {"kept", "gone"} <= set(looks.seen)))
        assert asked == []  # the watch showed both: no question asked
        pause[0] = True
        await asyncio.sleep(0.3)  # "gone" is deleted meanwhile, and no event comes
        pause[0] = False
        before = len(looks.seen)
        await wait_for(_now(lambda: looks.seen[before:].count("kept") >= 2))
        assert "gone" not in periodic and "gone" not in looks.seen[before:]
        assert sorted(set(asked)) == ["gone", "kept"] and asked.count("kept") == 1
    finally:
        await periodic.close()


async def test_close_ends_the_loop_when_a_wake_comes_with_the_cancel() -> None:
    """``close`` cancels the loop and waits for it. The loop waited for its wake with
    ``asyncio.wait_for``, which on Python 3.11 returns the wake instead of raising when the
    cancel lands after the wake was set but before the loop ran again: the loop went on looking
    every interval, ``close`` waited for good, and the operator's shutdown (its cleanup) hung
    until SIGKILL (a 30 s teardown in about one in 50 operator tests). Each number of loop
    turns between the wake and the cancel is tried, so one of them is that instant."""
    for turns in range(6):
        periodic = Periodic("tick", 30.0, Looks(), lambda: False)
        periodic.start()
        loop_task = periodic._task
        assert loop_task is not None
        for _ in range(3):
            await asyncio.sleep(0)  # the loop is waiting for its wake
        periodic._wake.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        # close is awaited here, so its cancel lands in this turn. Were the loop to go on,
        # close would wait for good: after 5 s this cancels the test's own wait, which cancels
        # the loop once more (close swallows the CancelledError, as it does the loop's)
        me = asyncio.current_task()
        assert me is not None
        fired: list[int] = []

        def hung(
            task: asyncio.Task[Any] = me, turns: int = turns, fired: list[int] = fired
        ) -> None:
            fired.append(turns)
            task.cancel()

        watchdog = asyncio.get_running_loop().call_later(5, hung)
        try:
            await periodic.close()
        finally:
            watchdog.cancel()
        if fired:
            me.uncancel()
        assert loop_task.done()
        assert not fired, f"close waited for a loop that went on, a wake {turns} turns before it"
