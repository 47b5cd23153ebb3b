"""How large one run's log may grow, on every world: one ``history_large`` warning event (and
one count of its metric) past ``WAYLINE_HISTORY_WARN_EVENTS``, a failure naming
``continue_as_new`` past ``WAYLINE_HISTORY_LIMIT_EVENTS``, and a chain of runs that continues
as new before either stays clear of both."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

import wayline
from tests.runtime import history_limit_flows as flows
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, settings
from wayline._core.events import EventType
from wayline.errors import ConfigurationError
from wayline.settings import Settings

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


def _count(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_a_log_past_the_warning_size_records_one_warning(engine: Engine) -> None:
    before = _count("wayline_histories_large_total")
    async with engine.worker([flows.hl_steps], settings=settings(history_warn_events=20)):
        handle = await engine.client.start(flows.hl_steps, 15)
        assert await handle.result(timeout=30) == sum(range(15))
    events = await engine.world.list_events(handle.run_id)
    [warning] = of_type(events, EventType.HISTORY_LARGE)
    assert warning.data == {"events": warning.seq - 1, "threshold": 20}
    assert warning.seq - 1 >= 20
    assert _count("wayline_histories_large_total") == before + 1


async def test_a_log_past_the_limit_fails_the_run_naming_continue_as_new(engine: Engine) -> None:
    before = _count("wayline_history_limit_failures_total")
    tight = settings(history_warn_events=0, history_limit_events=30)
    async with engine.worker([flows.hl_steps], settings=tight):
        handle = await engine.client.start(flows.hl_steps, 50)
        with pytest.raises(wayline.RunFailedError) as failed:
            await handle.result(timeout=30)
    assert failed.value.cause is not None
    assert failed.value.cause.code == "HISTORY_LIMIT_EXCEEDED"
    assert "wayline.continue_as_new" in failed.value.cause.message
    events = await engine.world.list_events(handle.run_id)
    assert len(events) <= 30 + 5  # stopped at the limit, not at the workflow's end
    assert _count("wayline_history_limit_failures_total") == before + 1


async def test_a_chain_that_continues_as_new_stays_under_both(engine: Engine) -> None:
    tight = settings(history_warn_events=25, history_limit_events=40)
    async with engine.worker([flows.hl_rolling], settings=tight):
        handle = await engine.client.start(flows.hl_rolling, 4, 5)
        assert await handle.result(timeout=30) == 1
    run_id = handle.first_run_id
    for _ in range(4):
        info = await engine.client.get_run(run_id)
        events = await engine.world.list_events(run_id)
        assert len(events) < 25 and not of_type(events, EventType.HISTORY_LARGE)
        run_id = info.continued_as or ""
    assert run_id == ""


def test_the_sizes_are_read_from_the_environment_and_checked() -> None:
    env = {"WAYLINE_HISTORY_WARN_EVENTS": "100", "WAYLINE_HISTORY_LIMIT_EVENTS": "0"}
    read = Settings.from_env(env)
    assert (read.history_warn_events, read.history_limit_events) == (100, 0)
    defaults = Settings.from_env({})
    assert (defaults.history_warn_events, defaults.history_limit_events) == (10_240, 51_200)
    with pytest.raises(ConfigurationError, match="WAYLINE_HISTORY_LIMIT_EVENTS"):
        Settings.from_env({"WAYLINE_HISTORY_LIMIT_EVENTS": "lots"})


async def test_a_run_that_unwinds_past_the_limit_runs_every_reversal(
    engine: Engine, tmp_path: Path
) -> None:
    """The limit stops a workflow's own growth, not its unwind: a run whose log reaches the
    limit after its unwind began, between two deliveries (a reversal's retry), runs every
    reversal and ends with its own error (before: the next delivery failed it with
    ``HISTORY_LIMIT_EXCEEDED``, and the reversals behind that retry never ran)."""
    free = str(tmp_path / "free")
    async with engine.worker([flows.hl_unwinds], settings=settings(history_warn_events=0)):
        handle = await engine.client.start(flows.hl_unwinds, free, 3)
        with pytest.raises(wayline.RunFailedError, match="hl_unwinds fails"):
            await handle.result(timeout=30)
    [begun] = of_type(await handle.events(), EventType.RUN_COMPENSATING)
    # the same run again, with a limit a few events past the unwind's beginning
    path = str(tmp_path / "limited")
    tight = settings(history_warn_events=0, history_limit_events=begun.seq + 3)
    async with engine.worker([flows.hl_unwinds], settings=tight):
        handle = await engine.client.start(flows.hl_unwinds, path, 3)
        with pytest.raises(wayline.RunFailedError, match="hl_unwinds fails") as failed:
            await handle.result(timeout=30)
    assert failed.value.cause is not None and failed.value.cause.code != "HISTORY_LIMIT_EXCEEDED"
    assert sorted(lines(path)) == [f"undo {i} {a}" for i in range(3) for a in (1, 2)]
    [again] = of_type(await handle.events(), EventType.RUN_COMPENSATING)
    assert again.seq == begun.seq  # the limit fell inside the unwind
