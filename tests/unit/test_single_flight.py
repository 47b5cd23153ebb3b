"""In-process single-flight: the loser awaits the winner's settlement, then skips."""

from __future__ import annotations

import asyncio

import pytest

from wayline.world.single_flight import SingleFlight


async def test_loser_waits_for_winner_then_skips() -> None:
    sf = SingleFlight()
    gate = asyncio.Event()
    order: list[str] = []

    async def winner_body() -> str:
        order.append("winner started")
        await gate.wait()
        order.append("winner settled")
        return "w"

    async def loser_body() -> str:
        order.append("loser ran")  # must never happen
        return "l"

    win = asyncio.create_task(sf.run("r:s1", winner_body))
    await asyncio.sleep(0)
    lose = asyncio.create_task(sf.run("r:s1", loser_body))
    await asyncio.sleep(0.05)
    assert not lose.done()  # never acks early
    gate.set()
    assert await win == (True, "w")
    assert await lose == (False, None)
    assert order == ["winner started", "winner settled"]
    assert not sf.busy("r:s1")


async def test_loser_skips_when_the_winner_fails() -> None:
    sf = SingleFlight()

    async def boom() -> None:
        await asyncio.sleep(0.02)
        raise RuntimeError("winner failed")

    async def never() -> None:
        raise AssertionError("loser must not run")

    win = asyncio.create_task(sf.run("r:s1", boom))
    await asyncio.sleep(0)
    lose = asyncio.create_task(sf.run("r:s1", never))
    with pytest.raises(RuntimeError):
        await win
    assert await lose == (False, None)

    # the slot is released after settlement
    async def ok() -> int:
        return 1

    assert await sf.run("r:s1", ok) == (True, 1)


async def test_keys_are_per_run_and_step() -> None:
    sf = SingleFlight()
    gate = asyncio.Event()

    async def held() -> int:
        await gate.wait()
        return 0

    async def quick() -> int:
        return 1

    first = asyncio.create_task(sf.run("r1:s1", held))
    await asyncio.sleep(0)
    assert await sf.run("r1:s2", quick) == (True, 1)
    assert await sf.run("r2:s1", quick) == (True, 1)
    gate.set()
    await first


async def test_absorbed_duplicate_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    sf = SingleFlight()

    async def slow() -> None:
        await asyncio.sleep(0.02)

    a = asyncio.create_task(sf.run("r:s1", slow))
    await asyncio.sleep(0)
    with caplog.at_level("WARNING", logger="wayline.runtime"):
        await sf.run("r:s1", slow)
    await a
    assert any("single-flight absorbed" in r.message for r in caplog.records)
