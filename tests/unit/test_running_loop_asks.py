"""How often the receive path and a step's body ask asyncio for the running loop (issue #39).
On CPython 3.11 each ask is a ``getpid`` system call (the running loop is checked against the
process that set it), so the asks of every step show in ``bench/steady.py``'s syscalls. A
wait through ``wayline.waits.wait_set`` asks as often as ``asyncio.wait_for`` did (once for
itself, once in ``Event.wait``), and not at all for itself when its caller passes the loop it
holds; a step body run under a fence, and a local receive's wait for the file's changes, ask
no more than they must.

The asks are counted by wrapping the Python functions of ``asyncio.events`` that every ask in
``asyncio``'s Python code goes through (``get_running_loop``, ``_get_running_loop``,
``_get_event_loop``, also as ``asyncio.get_running_loop``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from wayline._engine import fencing
from wayline.waits import wait_set
from wayline.worlds.local import LocalWorld

_ASKS = ("get_running_loop", "_get_running_loop", "_get_event_loop")


@contextmanager
def _counting_asks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The asks of the running loop made meanwhile, by the name of the function asked."""
    asked: list[str] = []
    for name in _ASKS:
        real = getattr(asyncio.events, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            asked.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(asyncio.events, name, counted)
        if hasattr(asyncio, name):
            monkeypatch.setattr(asyncio, name, counted)
    try:
        yield asked
    finally:
        monkeypatch.undo()


async def _set_soon(event: asyncio.Event) -> None:
    await asyncio.sleep(0)
    event.set()


@pytest.mark.parametrize("passed", [False, True], ids=["asked", "passed"])
async def test_a_wait_set_woken_by_its_event_asks_for_the_loop_as_wait_for_did(
    monkeypatch: pytest.MonkeyPatch, passed: bool
) -> None:
    """``wait_for`` asked once and ``Event.wait`` once; wait_set at e011396 asked three
    times (``ensure_future``, ``asyncio.wait``, ``Event.wait``)."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    setter = asyncio.ensure_future(_set_soon(event))
    with _counting_asks(monkeypatch) as asked:
        woken = wait_set(event, 30.0, loop) if passed else wait_set(event, 30.0)
        assert await woken is True
    await setter
    assert len(asked) == (1 if passed else 2), asked


@pytest.mark.parametrize("passed", [False, True], ids=["asked", "passed"])
async def test_a_wait_set_that_times_out_asks_for_the_loop_as_wait_for_did(
    monkeypatch: pytest.MonkeyPatch, passed: bool
) -> None:
    """On a timeout wait_set at e011396 asked a fourth time (its second ``asyncio.wait``)."""
    loop = asyncio.get_running_loop()
    with _counting_asks(monkeypatch) as asked:
        event = asyncio.Event()
        waited = wait_set(event, 0.01, loop) if passed else wait_set(event, 0.01)
        assert await waited is False
    assert len(asked) == (1 if passed else 2), asked


async def test_a_fenced_body_that_never_suspends_asks_for_no_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The body's eager task takes the loop of the fence's handler; at e011396 it asked."""
    fence = fencing.Fence(bound=60, handoff=30)
    fence.handler = asyncio.current_task()
    fencing.hold(fence)

    async def body() -> int:
        return 7

    with _counting_asks(monkeypatch) as asked:
        assert await fencing.run_body(body, None, step="no-asks") == 7
    assert asked == []


async def test_a_local_receive_asks_for_the_loop_once_a_wait(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A receive on a real SQLite file that finds nothing waits for the file's changes in
    turns of its poll (``Changes.wait``, as the looker): the wait asks once for itself, and
    each turn once more in ``Event.wait`` (how many turns depends on time, so only the asks
    of the wait are counted). At e011396 the wait asked for the loop in ``_looking`` and
    ``current_task()``, and each turn in ``ensure_future`` and one or two ``asyncio.wait``."""
    async with LocalWorld(tmp_path / "asks.db") as world:
        with _counting_asks(monkeypatch) as asked:
            assert await world.receive("running-loop-asks-receive", wait_seconds=0.2) == []
    assert asked.count("_get_running_loop") >= 1  # Event.wait's, one a turn of the wait
    assert [a for a in asked if a != "_get_running_loop"] == ["get_running_loop"]
