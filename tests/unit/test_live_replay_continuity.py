"""When the log continues a live replay (``_engine.live_replays``), on hand-built logs: only the
events that settle what a suspended workflow waits on are fed to it; anything else (a gap, a
log that changed under it, another replayer's decisions, a person's action) replays from the
first event. And the cache's bound and its setting."""

from __future__ import annotations

from typing import Any

import pytest

import wayline
from wayline._core.events import Event, EventType
from wayline._core.replay import Replay
from wayline._engine.live_replays import LiveReplay, LiveReplays
from wayline.errors import ConfigurationError
from wayline.settings import Settings


@wayline.workflow(name="lr_unit_idle")
async def idle() -> None:
    return None


def _event(seq: int, type_: EventType, cid: str | None = None, **data: Any) -> Event:
    return Event("run-1", seq, type_, cid, data, 1000.0 + seq)


LAST = _event(7, EventType.WAIT_CREATED, "w1", resumeAt=1010.0)


def _live(run_id: str = "run-1") -> LiveReplay:
    return LiveReplay(Replay(idle, run_id), LAST, defer=True)


def test_the_wakes_after_the_last_event_are_fed() -> None:
    tail = [
        LAST,
        _event(8, EventType.WAIT_COMPLETED, "w1"),
        _event(9, EventType.STEP_STARTED, "s2", attempt=1),  # a step worker's bare start
        _event(10, EventType.STEP_COMPLETED, "s2", result=1),
        _event(11, EventType.HOOK_RECEIVED, "h1", payload=None),
        _event(12, EventType.CHILD_COMPLETED, "c1"),
    ]
    assert _live().continued_by(tail) == tail[1:]
    assert _live().continued_by([LAST]) == []


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param([], id="the log no longer reaches the last event"),
        pytest.param([_event(7, EventType.STEP_CREATED, "s2")], id="another event at its seq"),
        pytest.param(
            [_event(7, EventType.WAIT_CREATED, "w1", resumeAt=2000.0)], id="another wait end"
        ),
        pytest.param([LAST, _event(9, EventType.WAIT_COMPLETED, "w1")], id="a gap"),
        pytest.param([LAST, _event(8, EventType.STEP_CREATED, "s2")], id="a decision"),
        pytest.param(
            [LAST, _event(8, EventType.STEP_STARTED, "s2", attempt=1, ownerMessageId="m9")],
            id="a start owned by another delivery",
        ),
        pytest.param([LAST, _event(8, EventType.RUN_CANCEL_REQUESTED)], id="a cancel"),
        pytest.param([LAST, _event(8, EventType.RUN_PAUSED)], id="a pause"),
        pytest.param([LAST, _event(8, EventType.RUN_REDRIVEN, "s1")], id="a redrive"),
        pytest.param([LAST, _event(8, EventType.RUN_BLOCKED)], id="a block"),
        pytest.param([LAST, _event(8, EventType.HOOK_DISPOSED, "h1")], id="a disposal"),
    ],
)
def test_anything_else_replays_from_the_first_event(tail: list[Event]) -> None:
    assert _live().continued_by(tail) is None


def test_the_cache_keeps_its_most_recently_left_runs_and_closes_the_rest() -> None:
    cache = LiveReplays(2)
    first, second, third = _live("run-1"), _live("run-2"), _live("run-3")
    for entry in (first, second, third):
        cache.keep(entry)
    assert len(cache) == 2 and first.replay.closed
    assert cache.take("run-2") is second and cache.take("run-2") is None  # one holder at once
    cache.clear()
    assert third.replay.closed and len(cache) == 0
    off = LiveReplays(0)
    off.keep(second)
    assert len(off) == 0 and second.replay.closed


def test_the_setting_reads_its_variable() -> None:
    assert Settings.from_env({}).replay_cache_runs == 256
    assert Settings.from_env({"WAYLINE_REPLAY_CACHE_RUNS": "0"}).replay_cache_runs == 0
    assert Settings.from_env({"WAYLINE_REPLAY_CACHE_RUNS": "12"}).replay_cache_runs == 12
    with pytest.raises(ConfigurationError, match="WAYLINE_REPLAY_CACHE_RUNS must be 0"):
        Settings.from_env({"WAYLINE_REPLAY_CACHE_RUNS": "many"})
