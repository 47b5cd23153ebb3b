"""Fair turns across worker processes (issue #38): with three worker processes of one free
slot each draining one queue, a small tenant's runs start within its share of the first
slots behind a large tenant's backlog, and a key of weight 3 gets three slots for one of a
key of weight 1. Each process keeps its own fair clock on NATS (SQLite keeps the clock in the
database every process shares); docs/nats.md ("Fair turns on JetStream") says why the turns
stay fair for the cluster: every process serves the keys in turn, so their takes together do."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime.fair_worker_proc import noted
from tests.runtime.harness import Engine
from tests.runtime.procs import Procs

WORKERS = 3


@pytest.fixture
async def workers(engine: Engine, tmp_path: Path) -> Any:
    spawned = Procs(engine.world.url, tmp_path, "tests.runtime.fair_worker_proc")
    yield spawned
    await spawned.close()


async def start_workers(workers: Procs) -> None:
    """``WORKERS`` worker processes of one free slot each, started one after the other: each
    takes work as soon as it is ready, as the replicas of a deployment do."""
    for _ in range(WORKERS):
        await workers.worker()


async def start_many(
    client: wayline.Client, path: Path, key: str, count: int, weight: int = 1
) -> list[wayline.RunHandle[str]]:
    options = wayline.StartOptions(fairness_key=key, fairness_weight=weight)
    return [await client.start_with(options, noted, str(path), f"{key}{i}") for i in range(count)]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def wait_for_lines(path: Path, count: int) -> list[str]:
    async with asyncio.timeout(120):
        while len(lines(path)) < count:  # noqa: ASYNC110 - another process writes the file
            await asyncio.sleep(0.05)
    return lines(path)


async def test_a_small_tenant_starts_within_its_share_across_three_worker_processes(
    engine: Engine, workers: Procs, tmp_path: Path
) -> None:
    """150 runs of tenant A queued before 10 of tenant B, then three worker processes of one
    slot each: B's runs are all among the first 2 x 10 x 2 = 40 runs begun (each process
    serves the two keys in turn, so about the first 2 x 10 + 3), not behind A's 150."""
    path = tmp_path / "begun"
    await start_many(engine.client, path, "fxa", 150)
    b_runs = await start_many(engine.client, path, "fxb", 10)
    await start_workers(workers)
    for handle in b_runs:
        await handle.result(timeout=120)
    order = lines(path)
    positions = [order.index(f"fxb{i}") for i in range(10)]
    assert max(positions) < 2 * 10 * 2, order


async def test_a_key_of_weight_three_gets_three_slots_per_round_across_worker_processes(
    engine: Engine, workers: Procs, tmp_path: Path
) -> None:
    """40 runs of a key of weight 1 and 40 of a key of weight 3, both queued before three
    worker processes of one slot each start: of the first 32 runs begun, the heavy key has
    about 3 / 4 (24; each process's own turns are 3 to 1, so their merged order is too, give
    or take a round per process), not the half that turns blind to the weight would give."""
    path = tmp_path / "begun"
    await start_many(engine.client, path, "fxlight", 40)
    await start_many(engine.client, path, "fxheavy", 40, weight=3)
    await start_workers(workers)
    first = (await wait_for_lines(path, 32))[:32]
    heavy = sum(label.startswith("fxheavy") for label in first)
    assert 20 <= heavy <= 28, first
