"""Replay as a pure function of (workflow, events): hand-built and golden histories."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest

import wayline
from tests.runtime import flows
from wayline._core.events import Event, EventType, NewEvent
from wayline._core.replay import NeedsStamp, Replay
from wayline.errors import StepFailedError

T = EventType
RUN = "wf_" + "0" * 32


class Log:
    """Builds an event history with world-like seqs and stamps."""

    def __init__(self, *args: Any) -> None:
        self.events: list[Event] = []
        self.t = 1000.0
        self.add(T.RUN_CREATED, None, {"workflow": "x", "input": {"args": list(args)}})
        self.add(T.RUN_STARTED)

    def add(self, t: EventType, cid: str | None = None, data: dict[str, Any] | None = None) -> Log:
        self.t += 1
        self.events.append(Event(RUN, len(self.events) + 1, t, cid, data or {}, self.t))
        return self

    def step(self, cid: str, name: str, result: Any, inp: Any = None) -> Log:
        self.add(T.STEP_CREATED, cid, {"stepName": name, "input": inp})
        self.add(T.STEP_STARTED, cid, {"attempt": 1, "ownerMessageId": "1"})
        return self.add(T.STEP_COMPLETED, cid, {"result": result})


def replay(workflow: Any, log: Log) -> Replay:
    r = Replay(workflow, RUN)
    r.feed(log.events)
    return r


def test_a_fresh_run_suspends_on_its_first_step() -> None:
    r = replay(flows.chain, Log(3))
    assert not r.finished
    assert [(s.cid, s.name, s.input) for s in r.new_steps.values()] == [
        ("s1", "add", {"args": [0, 0]})
    ]


def test_golden_history_completes_with_logged_results() -> None:
    log = Log(3).step("s1", "add", 0).step("s2", "add", 1).step("s3", "add", 3)
    r = replay(flows.chain, log)
    assert r.finished and r.root is not None and r.root.result() == 3
    # results come from the log, not from running the steps: a doctored log shows it
    log2 = Log(3).step("s1", "add", 100).step("s2", "add", 200).step("s3", "add", 300)
    r2 = replay(flows.chain, log2)
    assert r2.root is not None and r2.root.result() == 300


def test_replaying_the_same_log_twice_gives_the_same_state() -> None:
    log = Log(5).step("s1", "add", 0).step("s2", "add", 1)
    a, b = replay(flows.chain, log), replay(flows.chain, log)
    assert list(a.new_steps) == list(b.new_steps) == ["s3"]
    assert a.new_steps["s3"].input == b.new_steps["s3"].input == {"args": [1, 2]}


def test_feeding_incrementally_equals_feeding_at_once() -> None:
    log = Log(4).step("s1", "add", 0).step("s2", "add", 1).step("s3", "add", 3)
    whole = replay(flows.chain, log)
    live = Replay(flows.chain, RUN)
    for e in log.events:
        live.feed([e])
    assert [s.input for s in live.steps.values()] == [s.input for s in whole.steps.values()]


def test_a_different_step_at_a_slot_is_a_divergence_naming_both() -> None:
    log = Log(2).step("s1", "noop", 0)
    with pytest.raises(wayline.ReplayDivergenceError) as info:
        replay(flows.chain, log)
    assert "'noop'" in str(info.value) and "'add'" in str(info.value)
    assert info.value.code == "REPLAY_DIVERGENCE"


def test_a_logged_call_the_workflow_never_made_is_a_divergence() -> None:
    log = Log(1).step("s1", "add", 0).step("s2", "add", 5)  # chain(1) makes one call only
    with pytest.raises(wayline.ReplayDivergenceError, match="s2"):
        replay(flows.chain, log)


def test_race_takes_the_first_in_log_order() -> None:
    base = Log("m", 1.0)
    base.add(T.STEP_CREATED, "s1", {"stepName": "slow_marker"})
    base.add(T.WAIT_CREATED, "w1", {"resumeAt": base.t + 0.3})
    sleep_first = Log("m", 1.0)
    sleep_first.events = list(base.events)
    sleep_first.t = base.t
    sleep_first.add(T.WAIT_COMPLETED, "w1").add(T.STEP_COMPLETED, "s1", {"result": "done"})
    r = replay(flows.sleep_during_step, sleep_first)
    assert r.root is not None and r.root.result() == "sleep won"
    step_first = Log("m", 1.0)
    step_first.events = list(base.events)
    step_first.t = base.t
    step_first.add(T.STEP_COMPLETED, "s1", {"result": "done"}).add(T.WAIT_COMPLETED, "w1")
    r = replay(flows.sleep_during_step, step_first)
    assert r.root is not None and r.root.result() == "step won"


def test_failed_step_raises_step_failed_into_the_workflow() -> None:
    log = Log().add(T.STEP_CREATED, "s1", {"stepName": "fatal_step"})
    log.add(T.STEP_FAILED, "s1", {"error": {"name": "FatalError", "message": "card declined"}})
    r = replay(flows.catches_failure, log)
    assert r.root is not None and r.root.result() == "caught: card declined"
    r2 = replay(flows.fails, log)
    assert r2.root is not None and isinstance(r2.root.exception(), StepFailedError)


def test_hook_timeout_and_payload_race_in_log_order() -> None:
    log = Log("tok")
    log.add(T.HOOK_CREATED, "h1", {"token": "tok"})
    log.add(T.WAIT_CREATED, "h1.timeout", {"resumeAt": log.t + 1})
    timed = replay(flows.hook_timeout, Log("tok")).hooks
    assert timed["h1"].timeout is not None
    first_timeout = Log("tok")
    first_timeout.events = list(log.events)
    first_timeout.t = log.t
    first_timeout.add(T.WAIT_COMPLETED, "h1.timeout").add(T.HOOK_RECEIVED, "h1", {"payload": 1})
    r = replay(flows.hook_timeout, first_timeout)
    assert r.root is not None and r.root.result() == "timed out"
    first_payload = Log("tok")
    first_payload.events = list(log.events)
    first_payload.t = log.t
    first_payload.add(T.HOOK_RECEIVED, "h1", {"payload": 1})
    r = replay(flows.hook_timeout, first_payload)
    assert r.root is not None and r.root.result() == "got payload"
    assert r.pending_waits() == []  # the timeout no longer matters once the payload arrived


def test_time_moves_only_with_the_log() -> None:
    log = Log()
    r = replay(flows.deterministic, log)
    assert r.now == log.events[-1].created_at
    log.step("s1", "noop", 1)
    r = replay(flows.deterministic, log)
    assert r.root is not None
    ts, rnd, uid, after = r.root.result()
    assert ts == pytest.approx(log.events[1].created_at)
    assert after == pytest.approx(log.events[-1].created_at)
    again = replay(flows.deterministic, log)
    assert again.root is not None and again.root.result() == [ts, rnd, uid, after]


def test_typed_input_is_rebuilt_and_mismatch_names_the_field() -> None:
    ok = Log({"x": 1, "y": 2})
    r = replay(flows.typed, ok)
    assert r.new_steps["s1"].input == {"args": [{"x": 1, "y": 2}, 2]}
    bad = Log({"x": "one", "y": 2})
    r = replay(flows.typed, bad)
    assert r.root is not None
    err = r.root.exception()
    assert isinstance(err, wayline.SerializationError) and "x" in str(err)


def test_workflow_only_functions_raise_outside_a_workflow() -> None:
    for call in (
        lambda: wayline.sleep(1),
        lambda: wayline.create_hook(),
        wayline.now,
        wayline.random,
        wayline.uuid4,
        lambda: wayline.gather(),
        lambda: wayline.race(),
    ):
        with pytest.raises(wayline.NotInWorkflowError):
            call()
    with pytest.raises(wayline.NotInStepError):
        wayline.step_context()


def test_a_provisional_completion_advances_the_workflow_as_the_logged_one_would() -> None:
    log = Log(3).step("s1", "add", 0)
    log.add(T.STEP_CREATED, "s2", {"stepName": "add", "input": None})
    log.add(T.STEP_STARTED, "s2", {"attempt": 1, "ownerMessageId": "1"})
    r = replay(flows.chain, log)
    r.feed_provisional(NewEvent(T.STEP_COMPLETED, "s2", {"result": 1}))
    assert r.durable_seq == len(log.events) and r.last_seq == len(log.events) + 1
    assert list(r.new_steps) == ["s3"] and not r.needs_stamp
    r.settle_provisional(5000.0)
    assert r.provisional == [] and r.now == 5000.0
    # the same history, logged, gives the same next call
    log.add(T.STEP_COMPLETED, "s2", {"result": 1})
    assert list(replay(flows.chain, log).new_steps) == ["s3"]


def test_reading_time_during_a_provisional_completion_stops_the_replay() -> None:
    log = Log("unused")
    log.add(T.STEP_CREATED, "s1", {"stepName": "count_step", "input": None})
    log.add(T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "1"})
    r = Replay(flows.timed_chain, RUN)
    log.events[0] = Event(RUN, 1, T.RUN_CREATED, None, {"input": {"args": ["p", 2]}}, 1.0)
    r.feed(log.events)
    r.feed_provisional(NewEvent(T.STEP_COMPLETED, "s1", {"result": "step 0"}))
    assert r.needs_stamp  # wayline.now() raised NeedsStamp through the workflow
    assert r.new_steps == {}  # and it made no further call
    with pytest.raises(NeedsStamp):
        _ = r.now


@wayline.workflow(name="big_metadata")
async def big_metadata(size: int) -> Any:
    return await wayline.create_hook("tok", metadata={"blob": "x" * size})


def test_hook_metadata_over_the_payload_limit_fails_the_workflow_before_any_write() -> None:
    from contextvars import copy_context

    from wayline._core import limits

    def tight() -> Any:
        limits.install(limits.Limits(hook_payload=256 * 1024))  # the default is 64 MiB
        return replay(big_metadata, Log(300 * 1024))

    r = copy_context().run(tight)
    assert r.finished and r.root is not None
    err = r.root.exception()
    assert isinstance(err, wayline.PayloadTooLargeError), err
    assert "the metadata of hook 'tok'" in str(err) and "WAYLINE_MAX_HOOK_PAYLOAD_BYTES" in str(err)
    assert not r.new_hooks  # nothing to write: the hook was never made
    small = replay(big_metadata, Log(10))
    assert [h.metadata for h in small.new_hooks.values()] == [{"blob": "x" * 10}]


@wayline.step(name="unit_replay.closing_one")
async def closing_one() -> int:
    return 1


_closing_seen: list[Any] = []


async def _sleeps_then_reads_time() -> None:
    try:
        await wayline.sleep(3600)
    finally:
        _closing_seen.append(wayline.now())


@wayline.workflow(name="unit_replay.closing_reads_time")
async def closing_reads_time() -> Any:
    return await wayline.gather(_sleeps_then_reads_time(), closing_one())


def test_closing_a_replay_whose_finally_reads_time_during_a_provisional_event() -> None:
    """A replay dropped with a provisional event unwritten (the log moved under it, or the
    write failed) closes its waiting coroutines: a ``finally`` that reads workflow time there
    meets NeedsStamp, which must end that block as the await of a new call does, not escape
    the close (a BaseException: it crashed the delivery's handler, which then settled
    nothing)."""
    log = Log()
    log.add(T.WAIT_CREATED, "w1", {"resumeAt": 1002.0 + 3600})
    log.add(T.STEP_CREATED, "s1", {"stepName": "unit_replay.closing_one", "input": None})
    log.add(T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "1"})
    r = replay(closing_reads_time, log)
    r.feed_provisional(NewEvent(T.STEP_COMPLETED, "s1", {"result": 1}))
    assert not r.finished and not r.needs_stamp
    _closing_seen.clear()
    r.close()
    assert _closing_seen == []  # the block ended at the time read


async def _cleans_up() -> None:
    await closing_one()


async def _sleeps_then_gathers() -> None:
    try:
        await wayline.sleep(3600)
    finally:
        await wayline.gather(_cleans_up())


@wayline.workflow(name="unit_replay.closing_gathers")
async def closing_gathers() -> Any:
    return await _sleeps_then_gathers()


def test_closing_a_replay_closes_the_coroutines_its_finally_blocks_spawn() -> None:
    """A ``finally`` that gathers coroutines spawns fibers as the replay closes: they are
    closed too, never left unstarted for the collector (which warned, never awaited)."""
    r = replay(closing_gathers, Log())
    assert not r.finished
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.close()
        del r
        gc.collect()
    assert [str(w.message) for w in caught] == []


@wayline.workflow(name="unit_replay.sleeps_forever")
async def sleeps_forever() -> str:
    await wayline.sleep(float("inf"))
    return "woken"


def test_a_wait_past_the_year_9999_an_older_version_recorded_still_replays() -> None:
    """Such a wait is refused when the workflow asks for it now; one an older version recorded
    (``resumeAt: Infinity``, a run sleeping until woken or cancelled) is history: its replay
    must not raise where the log has the wait (a divergence, and the run set aside)."""
    log = Log().add(T.WAIT_CREATED, "w1", {"resumeAt": float("inf")})
    r = replay(sleeps_forever, log)
    assert not r.finished and [w.cid for w in r.pending_waits()] == ["w1"]
    r.feed(log.add(T.WAIT_COMPLETED, "w1", {"early": True}).events[-1:])
    assert r.root is not None and r.root.result() == "woken"


@wayline.workflow(name="unit_replay.refused_then_steps")
async def refused_then_steps() -> Any:
    try:
        await wayline.sleep(float("inf"))
    except ValueError:
        return await closing_one()
    return "slept"


def test_a_refused_wait_is_refused_again_when_its_history_replays() -> None:
    log = Log().add(T.STEP_CREATED, "s1", {"stepName": "unit_replay.closing_one", "input": None})
    r = replay(refused_then_steps, log)
    assert not r.finished and list(r.steps) == ["s1"]
