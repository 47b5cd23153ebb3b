"""Fairness of ready work across tenants: with one worker slot and a deep backlog of one
fairness key, the runs of another key start within the first few slots, and a key's weight
is its share of the slots."""

from __future__ import annotations

import wayline
from tests.runtime.harness import Engine
from tests.runtime.ordering_harness import ordered_engine, record_starts

__all__ = ["ordered_engine"]


@wayline.workflow(name="fairness_tests.tenant_run")
async def tenant_run(label: str) -> str:
    return label


async def start_many(
    client: wayline.Client, key: str, count: int, weight: int = 1
) -> dict[str, str]:
    options = wayline.StartOptions(fairness_key=key, fairness_weight=weight)
    labels: dict[str, str] = {}
    for i in range(count):
        handle = await client.start_with(options, tenant_run, f"{key}{i}")
        labels[handle.run_id] = f"{key}{i}"
    return labels


async def run_all(engine: Engine, labels: dict[str, str]) -> list[str]:
    started = record_starts(engine.world)
    async with engine.worker([tenant_run]):
        for run_id, label in labels.items():
            assert await engine.client.handle(run_id).result(timeout=60) == label
    return [labels[run_id] for run_id in started]


async def test_a_small_tenant_is_not_stuck_behind_a_large_backlog(ordered_engine: Engine) -> None:
    """200 runs of tenant A queued before 5 of tenant B: with two keys taking turns, B's runs
        are all among the first 2 x 5 x 2 = 20 runs the queue hands out (the keys alternate, so
    they are in fact among the first 10)."""
    client = ordered_engine.client
    labels = await start_many(client, "a", 200)
    labels |= await start_many(client, "b", 5)
    order = await run_all(ordered_engine, labels)
    positions = [order.index(f"b{i}") for i in range(5)]
    assert max(positions) < 2 * 5 * 2, positions
    assert positions == sorted(positions)  # a key's own runs keep their order
    assert [x for x in order if x.startswith("a")] == [f"a{i}" for i in range(200)]


async def test_a_tenant_of_weight_three_gets_three_slots_per_round(ordered_engine: Engine) -> None:
    client = ordered_engine.client
    labels = await start_many(client, "heavy", 12, weight=3)
    labels |= await start_many(client, "light", 12)
    order = await run_all(ordered_engine, labels)
    first = order[:8]
    assert sum(x.startswith("heavy") for x in first) == 6, order
