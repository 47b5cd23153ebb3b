"""``wayline runs show`` prints a run's priority and fairness key (docs/sdk.md, "Priority and
fairness"), in text and in JSON, on both worlds."""

from __future__ import annotations

import asyncio
import json

import wayline
from tests.cli.conftest import Run
from wayline.world import open_world


async def start(world_url: str, options: wayline.StartOptions) -> str:
    world = open_world(world_url)
    async with world:
        handle = await wayline.Client(world).start_with(options, "show_priority_tests.queued")
        return handle.run_id


def test_runs_show_prints_the_priority_and_fairness_key(world_url: str, run: Run) -> None:
    options = wayline.StartOptions(priority=3, fairness_key="acme", fairness_weight=2)
    run_id = asyncio.run(start(world_url, options))
    code, out, err = run("runs", "show", run_id)
    assert code == 0, err
    assert "priority  3\n" in out and "fairness  acme (weight 2)\n" in out
    code, out, err = run("runs", "show", run_id, "--json")
    shown = json.loads(out)
    assert (shown["priority"], shown["fairnessKey"], shown["fairnessWeight"]) == (3, "acme", 2)


def test_a_run_started_without_them_shows_the_default_priority(world_url: str, run: Run) -> None:
    run_id = asyncio.run(start(world_url, wayline.StartOptions()))
    code, out, err = run("runs", "show", run_id)
    assert code == 0, err
    assert "priority  5\n" in out and "fairness" not in out
    shown = json.loads(run("runs", "show", run_id, "--json")[1])
    assert (shown["priority"], shown["fairnessKey"]) == (5, None)
