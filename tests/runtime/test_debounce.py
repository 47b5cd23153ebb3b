"""Debounce (``wayline.Debounce``) on every world: starts with one key within the quiet period
collapse into one run, from any client, which begins after the period with the last input; a
start after the run began starts a new run."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import wayline
from tests.runtime import debounce_flows as df
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import render_show
from wayline.errors import ConfigurationError
from wayline_operator.status import run_status

pytestmark = pytest.mark.partitioned  # docs/nats.md, "Partitions"


async def test_starts_within_the_period_collapse_into_one_run_with_the_last_input(
    engine: Engine, tmp_path: Path
) -> None:
    """Six starts from two clients (each on its own world of one store) before the period
    ends: one run, every handle names it, it begins once with the sixth input, and another key
    is a run of its own."""
    path = str(tmp_path / "marks")
    other = wayline.Client(await engine.make_world())
    clients = [engine.client, other]
    async with engine.worker([df.reindex]):
        handles = [await clients[i % 2].start(df.reindex, path, "doc-a", i) for i in range(6)]
        apart = await engine.client.start(df.reindex, path, "doc-b", 0)
        assert len({h.run_id for h in handles}) == 1
        assert apart.run_id != handles[0].run_id
        assert [await h.result(timeout=30) for h in handles] == ["doc-a@5"] * 6
        assert await apart.result(timeout=30) == "doc-b@0"
    assert sorted(df.ran(path)) == ["doc-a 5", "doc-b 0"]
    events = await handles[0].events()
    assert len(of_type(events, EventType.RUN_DEBOUNCED)) == 5
    info = await engine.client.get_run(handles[0].run_id)
    assert info.input is not None and "5" in str(info.input)  # the run shows the input it ran


async def test_a_start_after_the_run_began_starts_a_new_run(engine: Engine, tmp_path: Path) -> None:
    path = str(tmp_path / "marks")
    async with engine.worker([df.reindex]):
        first = await engine.client.start(df.reindex, path, "doc-c", 1)
        assert await first.result(timeout=30) == "doc-c@1"
        second = await engine.client.start(df.reindex, path, "doc-c", 2)
        assert second.run_id != first.run_id
        assert await second.result(timeout=30) == "doc-c@2"
    assert df.ran(path) == ["doc-c 1", "doc-c 2"]
    assert not of_type(await first.events(), EventType.RUN_DEBOUNCED)


async def test_a_debounced_run_waits_out_its_period_before_it_begins(
    engine: Engine, tmp_path: Path
) -> None:
    """A worker that receives the run's start before the quiet period ended (here: a worker
    running from the first start) does not begin it; nothing ran while later starts came."""
    path = str(tmp_path / "marks")
    async with engine.worker([df.reindex]):
        handle = await engine.client.start(df.reindex, path, "doc-d", 1)
        again = await engine.client.start(df.reindex, path, "doc-d", 2)
        assert again.run_id == handle.run_id
        assert df.ran(path) == []  # the period (1 s) has not passed since the last start
        info = await engine.client.get_run(handle.run_id)
        events = await handle.events()
        if info.status is wayline.RunStatus.PENDING:  # not begun yet (a loaded machine may be late)
            out = io.StringIO()
            render_show(info, events, out, "test", None)
            shown = out.getvalue()
            assert "debounced until " in shown and "'debounce_flows.reindex:doc-d'" in shown
            wait = run_status(info, events, now=engine.world.now())["waitingFor"][0]
            assert wait["kind"] == "debounce" and wait["until"]
            assert wait["limit"] == "debounce_flows.reindex:doc-d"
        assert await handle.result(timeout=30) == "doc-d@2"
    events = await handle.events()
    [started] = of_type(events, EventType.RUN_STARTED)
    [debounced] = of_type(events, EventType.RUN_DEBOUNCED)
    assert started.created_at - debounced.created_at >= 1.0 - 0.05  # the world's stamps


def test_bad_debounce_options_are_clear_errors() -> None:
    with pytest.raises(ConfigurationError, match=re.escape("Debounce.period")):
        wayline.Debounce(period="soon")
    with pytest.raises(ConfigurationError, match="must be > 0"):
        wayline.Debounce(period=0)


async def test_a_debounced_start_takes_no_id(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="is debounced"):
        await engine.client.start_with(
            wayline.StartOptions(id="mine"), df.reindex, str(tmp_path / "m"), "doc-e", 1
        )


async def test_a_fork_of_a_debounced_run_runs_its_last_input_at_once(
    engine: Engine, tmp_path: Path
) -> None:
    """The run ran the second start's input; a fork from its step runs that input too (not
    the first start's), and waits out no quiet period of its own."""
    path = str(tmp_path / "marks")
    async with engine.worker([df.reindex_in_a_step]):
        first = await engine.client.start(df.reindex_in_a_step, path, "doc-f", 1)
        again = await engine.client.start(df.reindex_in_a_step, path, "doc-f", 2)
        assert again.run_id == first.run_id
        assert await first.result(timeout=30) == "doc-f@2"
        fork = await engine.client.fork(first.run_id, from_step="debounce_flows.write")
        assert await fork.result(timeout=30) == "doc-f@2"
    info = await engine.client.get_run(fork.run_id)
    assert "debounce" not in info.attributes


async def test_a_run_paused_before_it_began_takes_later_starts_of_its_key(
    engine: Engine, tmp_path: Path
) -> None:
    """A pause while the run is pending does not make it begin: a later start of its key
    collapses into it as into an unpaused one, and once unpaused it runs that start's input."""
    path = str(tmp_path / "marks")
    first = await engine.client.start(df.reindex_in_a_step, path, "doc-g", 1)
    assert await first.pause("held before it began")
    again = await engine.client.start(df.reindex_in_a_step, path, "doc-g", 2)
    assert again.run_id == first.run_id
    assert await first.unpause()
    async with engine.worker([df.reindex_in_a_step]):
        assert await first.result(timeout=30) == "doc-g@2"
    # the step's body, not the workflow's own code, which a rebuilt replay runs again by design
    assert lines(path) == ["wrote doc-g 2"]
    assert len(of_type(await first.events(), EventType.RUN_DEBOUNCED)) == 1


async def test_a_run_paused_after_it_began_takes_no_later_start(
    engine: Engine, tmp_path: Path
) -> None:
    path = str(tmp_path / "marks")
    async with engine.worker([df.reindex_held]):
        first = await engine.client.start(df.reindex_held, path, "doc-h", "debounce-held-h")
        await wait_for(lambda: _has(path, "doc-h"), timeout=30)
    assert await first.pause("held after it began")
    again = await engine.client.start(df.reindex_held, path, "doc-h", "debounce-held-h2")
    assert again.run_id != first.run_id
    assert not of_type(await first.events(), EventType.RUN_DEBOUNCED)
    for handle in (first, again):
        await engine.client.cancel(handle.run_id)


async def _has(path: str, doc: str) -> bool:
    return any(line.startswith(doc) for line in df.ran(path))
