"""Two bodies of one step never run at the same time (issue 16, item 2), on every world.

Two workers share the store, as two pods share a world; the bound is short (1.5 s) so that a
run or a step outlives it. Every body writes start/end lines with pid and time (see
``fencing_flows``): no two bodies of one step may overlap, and each counts how often it ran.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import fencing_flows as ff
from tests.runtime.flows import lines
from tests.runtime.harness import Engine, of_type, settings, wait_for
from wayline._core.definitions import WorkflowDefinition
from wayline._core.events import EventType
from wayline.cli.timeline import render_show

VISIBILITY = 2.0
BOUND = {"max_invocation_seconds": 1.5, "lease_seconds": 4.0}


@asynccontextmanager
async def two_workers(engine: Engine, flows: list[WorkflowDefinition]) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        for _ in range(2):
            world = await engine.make_world(visibility_seconds=VISIBILITY)
            await stack.enter_async_context(
                engine.worker(flows, world=world, settings=settings(**BOUND))
            )
        yield


def bodies(path: str) -> dict[str, list[tuple[float, float, str]]]:
    """Per step key: (start, stop, how) of every body, from the marker lines."""
    open_: dict[tuple[str, str, str], float] = {}
    out: dict[str, list[tuple[float, float, str]]] = {}
    for line in lines(path):
        what, key, attempt, pid, at = line.split()
        if what == "start":
            open_[(key, attempt, pid)] = float(at)
        else:
            start = open_.pop((key, attempt, pid))
            out.setdefault(key, []).append((start, float(at), what))
    assert not open_, f"bodies that never stopped: {open_}"
    return out


def assert_never_concurrent(runs: dict[str, list[tuple[float, float, str]]]) -> None:
    for key, spans in runs.items():
        spans = sorted(spans)
        for (_, stop, _), (start, _, _) in itertools.pairwise(spans):
            assert stop <= start, f"two bodies of {key} overlapped: {spans}"


async def test_a_long_run_of_short_steps_hands_off_and_runs_each_body_once(
    engine: Engine, tmp_path: Path
) -> None:
    """10 steps of 0.4 s under a 1.5 s bound: the run hands off at step boundaries, so no
    delivery outlives the bound and no step body runs twice (before: steps 4-9 ran twice)."""
    path = str(tmp_path / "m")
    async with two_workers(engine, [ff.many_short_steps]):
        handle = await engine.client.start(ff.many_short_steps, path, 10, 0.4)
        assert await handle.result(timeout=60) == 45
    runs = bodies(path)
    assert {k: len(v) for k, v in runs.items()} == {f"s{i}": 1 for i in range(10)}
    assert all(how == "end" for spans in runs.values() for _, _, how in spans)
    assert_never_concurrent(runs)
    events = await handle.events()
    assert not of_type(events, EventType.STEP_RETRYING)
    owners = {e.data.get("ownerMessageId") for e in of_type(events, EventType.STEP_STARTED)}
    assert len(owners) > 1  # driven under several messages: it was handed off


async def test_a_long_unwind_of_short_reversals_hands_off_and_runs_each_once(
    engine: Engine, tmp_path: Path
) -> None:
    """8 reversals of 0.4 s under a 1.5 s bound: the unwind hands off between two reversals,
    as the forward path does between two steps, so no reversal is cut off by the bound and
    none runs twice (before: one delivery ran the whole unwind, past the bound)."""
    path = str(tmp_path / "m")
    async with two_workers(engine, [ff.long_unwind]):
        handle = await engine.client.start(ff.long_unwind, path, 8, 0.4)
        with pytest.raises(wayline.RunFailedError, match="long_unwind fails"):
            await handle.result(timeout=60)
    runs = bodies(path)
    assert {k: [how for _, _, how in v] for k, v in runs.items()} == {
        f"u{i}": ["end"] for i in range(8)
    }
    assert_never_concurrent(runs)
    events = await handle.events()
    assert not of_type(events, EventType.STEP_RETRYING)
    reversals = [
        e for e in of_type(events, EventType.STEP_STARTED) if ".c" in str(e.correlation_id)
    ]
    assert len(reversals) == 8
    assert len({e.data.get("ownerMessageId") for e in reversals}) > 1  # handed off


async def test_a_step_that_overruns_the_bound_is_fenced_and_retried(
    engine: Engine, tmp_path: Path
) -> None:
    """No timeout=: the body still running at the bound is cut off before its delivery can be
    redelivered; that attempt counts (visible in `runs show`) and the retry finishes."""
    path = str(tmp_path / "m")
    async with two_workers(engine, [ff.overrun]):
        handle = await engine.client.start(ff.overrun, path, 4.0)
        assert await handle.result(timeout=60) == "attempt 2"
    runs = bodies(path)
    assert [how for _, _, how in sorted(runs["over"])] == ["cut", "end"]
    assert_never_concurrent(runs)
    events = await handle.events()
    [retrying] = of_type(events, EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"
    out = io.StringIO()
    render_show(await engine.client.get_run(handle.run_id), events, out)
    assert "INVOCATION_FENCED" in out.getvalue()


async def test_a_step_with_a_timeout_runs_once_beyond_the_bound(
    engine: Engine, tmp_path: Path
) -> None:
    """`timeout=` says the step needs longer than the bound: never inline, queue-owned from
    the start, its delivery renewed while it runs; one body, however long (below 5 s)."""
    from tests.runtime import timeout_flows as tf

    path = str(tmp_path / "m")
    async with two_workers(engine, [tf.long_run]):
        handle = await engine.client.start(tf.long_run, path, 3.0)
        assert await handle.result(timeout=60) == "long done"
    runs = bodies(path)
    assert [how for _, _, how in runs["long"]] == ["end"]
    events = await handle.events()
    starts = of_type(events, EventType.STEP_STARTED)
    assert [s.data.get("ownerMessageId") for s in starts] == [None]  # queue-owned, one start
    assert not of_type(events, EventType.STEP_RETRYING)


async def test_a_step_past_its_own_timeout_is_cut_off_and_retried(
    engine: Engine, tmp_path: Path
) -> None:
    """`timeout="1s"` is start-to-close: an attempt still running after 1 s is cut off (well
    inside the 1.5 s bound), counted and retried."""
    from tests.runtime import timeout_flows as tf

    path = str(tmp_path / "m")
    async with two_workers(engine, [tf.past_its_timeout]):
        handle = await engine.client.start(tf.past_its_timeout, path, 3.0)
        assert await handle.result(timeout=60) == "attempt 2"
    runs = bodies(path)
    assert [how for _, _, how in sorted(runs["slow"])] == ["cut", "end"]
    assert_never_concurrent(runs)
    [retrying] = of_type(await handle.events(), EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"
    # tripped by the step's own timer, not at the renewal loop's next look (up to a thirtieth
    # of the visibility later); a look that lands in the same instant as the timer, before its
    # callback runs, trips first, naming the bound the timeout set (1 s from its start)
    message = retrying.data["error"]["message"]
    held = re.search(r"held (\d+\.\d)s, past its bound of 1\.0\d*s", message)
    assert "past its timeout of 1s" in message or (held and float(held[1]) < 1.2), message


async def test_a_sync_step_past_its_own_timeout_is_not_taken_when_its_thread_returns(
    engine: Engine,
) -> None:
    """A plain ``def`` body cannot be cut off, only outlived: the attempt that ran 2.5 s under
    ``timeout="1s"`` is recorded as cut off (its late result was recorded as the step's), and
    the step is retried. The renewal loop checks every visibility/6 (5 s here): the trip is the
    step's own timer."""
    from tests.runtime import timeout_flows as tf

    async with engine.worker([tf.thread_past_its_timeout]):
        handle = await engine.client.start(tf.thread_past_its_timeout, 2.5)
        assert await handle.result(timeout=60) == "attempt 2"
    [retrying] = of_type(await handle.events(), EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"
    assert "past its timeout of 1s" in retrying.data["error"]["message"]


async def test_the_worker_refuses_bounds_that_break_the_lease(engine: Engine) -> None:
    bad: dict[str, Any] = {"max_invocation_seconds": 1.5, "lease_seconds": 2.0}
    world = await engine.make_world(visibility_seconds=1.0)
    with pytest.raises(wayline.ConfigurationError) as info:
        wayline.Worker(world, [ff.overrun], settings=settings(**bad))
    message = info.value.message
    assert "(1.5)" in message and "(1)" in message and "2.5s" in message and "(2)" in message
    with pytest.raises(wayline.ConfigurationError, match="WAYLINE_HANDOFF_SECONDS"):
        wayline.Worker(world, [ff.overrun], settings=settings(**BOUND, handoff_seconds=1.5))


async def test_a_holder_whose_renewals_fail_stops_before_its_delivery_returns(
    engine: Engine, tmp_path: Path
) -> None:
    """Renewals fail (the holder cannot reach the world's queue): the fence trips after half a
    visibility window and cuts the body off before the delivery could be redelivered; another
    worker then runs the retry, never beside it."""
    path = str(tmp_path / "m")
    sick = await engine.make_world(visibility_seconds=VISIBILITY)

    async def no_renewal(delivery: Any) -> None:
        raise wayline.WorldUnavailableError("renewals cut off (test)")

    sick.renew = no_renewal  # type: ignore[method-assign]
    async with engine.worker([ff.overrun], world=sick, settings=settings(**BOUND)):
        handle = await engine.client.start(ff.overrun, path, 3.0)
        await wait_for(lambda: _cut(path), timeout=15)
    async with two_workers(engine, [ff.overrun]):
        assert await handle.result(timeout=30) == "attempt 2"
    runs = bodies(path)
    assert [how for _, _, how in sorted(runs["over"])] == ["cut", "end"]
    assert_never_concurrent(runs)
    [retrying] = of_type(await handle.events(), EventType.STEP_RETRYING)
    assert retrying.data["error"]["code"] == "INVOCATION_FENCED"
    assert "not renewed" in retrying.data["error"]["message"]


async def _cut(path: str) -> bool:
    return any(line.startswith("cut ") for line in lines(path))
