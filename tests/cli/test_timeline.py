"""The folding and printing behind ``wayline run`` progress and ``wayline runs show``, on
hand-built logs (the cases the end-to-end tests do not reach quickly: timeouts, take-overs)."""

from __future__ import annotations

import io
from typing import Any

from wayline._core.events import Event, EventType, RunStatus
from wayline.cli.timeline import LiveProgress, fmt_duration, fold, human_input, render_show
from wayline.world import RunInfo

T = EventType
RUN = "wf_test"


def log(*entries: tuple[float, EventType, str | None, dict[str, Any]]) -> list[Event]:
    return [Event(RUN, i + 1, t, cid, data, at) for i, (at, t, cid, data) in enumerate(entries)]


EVENTS = log(
    (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": [7]}}),
    (100.1, T.RUN_STARTED, None, {}),
    (100.2, T.STEP_CREATED, "s1", {"stepName": "pay"}),
    (100.2, T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}),
    (101.0, T.STEP_STARTED, "s1", {"attempt": 2}),  # the owner died: taken over
    (
        101.5,
        T.STEP_RETRYING,
        "s1",
        {
            "error": {"name": "OSError", "message": "reset", "code": "USER_ERROR"},
            "retryAfter": 102.5,
        },
    ),
    (102.5, T.STEP_STARTED, "s1", {"attempt": 3}),
    (102.6, T.STEP_FAILED, "s1", {"error": {"name": "FatalError", "message": "declined"}}),
    (102.7, T.HOOK_CREATED, "h1", {"token": "approve:1"}),
    (102.7, T.WAIT_CREATED, "h1.timeout", {"resumeAt": 162.6}),
    (162.7, T.WAIT_COMPLETED, "h1.timeout", {"resumeAt": 162.6}),
    (162.8, T.WAIT_CREATED, "w1", {"resumeAt": 192.7}),
    (
        162.9,
        T.RUN_FAILED,
        None,
        {"error": {"code": "HOOK_TIMEOUT", "name": "HookTimeout", "message": "too late"}},
    ),
)


def test_fold_tracks_attempts_take_overs_and_hook_timeouts() -> None:
    tl = fold(RUN, EVENTS)
    step = tl.steps["s1"]
    assert step.status == "failed"
    assert [(a.number, a.outcome) for a in step.attempts] == [
        (1, "abandoned"),
        (2, "retrying"),
        (3, "failed"),
    ]
    assert step.attempts[1].retry_at == 102.5
    hook = tl.hooks["h1"]
    assert (hook.status, hook.timeout_at) == ("timed out", 162.6)
    assert list(tl.waits) == ["w1"]  # the hook's timeout is not a sleep
    assert tl.waits["w1"].seconds == 30.0  # decided at the previous event's time
    assert tl.status == "failed"


def test_live_progress_prints_each_transition() -> None:
    out = io.StringIO()
    LiveProgress(out, "sqlite:////tmp/w.db").feed(EVENTS)
    text = out.getvalue()
    assert "step pay started (attempt 2; attempt 1 abandoned, no end recorded)" in text
    assert "step pay attempt 2 failed: OSError: reset; retry in 1.00 s" in text
    assert "step pay failed: FatalError: declined" in text
    assert "hook approve:1 waiting for a payload" in text
    assert "wayline hooks resume approve:1 --payload 'JSON' --world sqlite:////tmp/w.db" in text
    assert "hook approve:1 times out in 1m 00s" in text
    assert "hook approve:1 timed out" in text
    assert "sleep 30.00 s" in text
    assert "run failed: [HOOK_TIMEOUT] HookTimeout: too late" in text


def test_runs_show_renders_the_timeline() -> None:
    info = RunInfo(
        RUN,
        "w",
        RunStatus.FAILED,
        input={"args": [7]},
        error={"code": "HOOK_TIMEOUT", "name": "HookTimeout", "message": "too late"},
        created_at=100.0,
        started_at=100.1,
        ended_at=162.9,
    )
    out = io.StringIO()
    render_show(info, EVENTS, out)
    text = out.getvalue()
    assert "input     7" in text
    assert "step pay" in text
    assert "3 attempts" in text
    assert "attempt 1: abandoned (no end recorded; started +200 ms)" in text
    assert "abandoned after" not in text
    assert "attempt 2: failed after 500 ms: OSError: reset (retried 1.00 s later)" in text
    assert "hook approve:1" in text
    assert "timed out" in text
    assert "error     [HOOK_TIMEOUT] HookTimeout: too late" in text
    assert "not reached (the run ended) (until 1970-01-01 00:03:12)" in text


def test_an_ended_run_does_not_show_a_step_as_running() -> None:
    """A run cancelled while a step ran: the step's body may finish later, but nothing of it
    is recorded; the timeline says so instead of showing it running forever."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.STEP_CREATED, "s1", {"stepName": "slow"}),
        (100.2, T.STEP_STARTED, "s1", {"attempt": 1}),
        (101.0, T.RUN_CANCEL_REQUESTED, None, {"reason": "no"}),
        (101.1, T.RUN_CANCELLED, None, {"reason": "no"}),
    )
    info = RunInfo(RUN, "w", RunStatus.CANCELLED, created_at=100.0, started_at=100.1)
    live = io.StringIO()
    render_show(info, events[:4], live)
    assert "running" in live.getvalue() and "unfinished" not in live.getvalue()
    ended = RunInfo(
        RUN, "w", RunStatus.CANCELLED, created_at=100.0, started_at=100.1, ended_at=101.1
    )
    out = io.StringIO()
    render_show(ended, events, out)
    text = out.getvalue()
    assert "step slow" in text and "unfinished" in text and " running " not in text
    assert "the run ended first: no result recorded" in text


def test_small_formatters() -> None:
    assert fmt_duration(0.0123) == "12 ms"
    assert fmt_duration(3.5) == "3.50 s"
    assert fmt_duration(125) == "2m 05s"
    assert fmt_duration(3 * 3600 + 60) == "3h 01m"
    assert human_input({"args": [1, 2]}) == [1, 2]
    assert human_input({"args": [{"a": 1}]}) == {"a": 1}
    assert human_input({"args": [1], "kwargs": {"b": 2}}) == {"args": [1], "kwargs": {"b": 2}}


def test_a_duration_that_rounds_up_is_shown_in_the_next_unit() -> None:
    """A 1 s retry measured as 0.9996 s reads "1.00 s", not "1000 ms"; 59.996 s "1m 00s"."""
    assert fmt_duration(0.9996) == "1.00 s"
    assert fmt_duration(59.996) == "1m 00s"
    assert fmt_duration(0.9994) == "999 ms"
    assert fmt_duration(59.994) == "59.99 s"


def test_a_duration_at_the_edges_is_shown_in_one_unit() -> None:
    """The float just under 0.9995 printed "1000 ms" (times 1000 it is 999.5, which rounds
    up); an infinite one (``RetryPolicy(max_interval=math.inf)`` is accepted, and recorded)
    raised OverflowError out of ``runs show``."""
    import math

    assert fmt_duration(math.nextafter(0.9995, 0)) == "1.00 s"
    assert fmt_duration(0.99949) == "999 ms"
    assert fmt_duration(math.inf) == "forever"
    assert fmt_duration(math.nan) == "0 ms"
    assert fmt_duration(-1.0) == "0 ms"
    assert fmt_duration(3599.4) == "59m 59s"
    assert fmt_duration(3599.6) == "1h 00m"


def test_the_saga_unwind_is_shown_with_what_a_person_can_do() -> None:
    events = log(
        (10.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (10.1, T.RUN_STARTED, None, {}),
        (10.2, T.STEP_CREATED, "s1", {"stepName": "hold"}),
        (10.2, T.STEP_STARTED, "s1", {"attempt": 1}),
        (10.3, T.STEP_COMPLETED, "s1", {"result": "held"}),
        (10.4, T.HOOK_CREATED, "h1", {"token": "t"}),
        (11.0, T.RUN_CANCEL_REQUESTED, None, {"reason": "changed my mind"}),
        (11.1, T.RUN_COMPENSATING, None, {"reason": "cancelled"}),
        (11.1, T.STEP_CREATED, "s1.c0", {"stepName": "hold:compensate", "compensates": "s1"}),
        (11.1, T.STEP_STARTED, "s1.c0", {"attempt": 1}),
        (11.2, T.STEP_FAILED, "s1.c0", {"error": {"name": "FatalError", "message": "offline"}}),
        (
            11.3,
            T.RUN_COMPENSATION_STUCK,
            None,
            {"step": "hold", "stepId": "s1", "error": {"name": "FatalError", "message": "offline"}},
        ),
    )
    tl = fold(RUN, events)
    assert tl.status == "compensation_stuck"
    assert tl.steps["s1.c0"].label == "hold:compensate (reverses s1)"
    out = io.StringIO()
    LiveProgress(out, "sqlite:////w.db").feed(events)
    text = out.getvalue()
    assert "cancel requested (changed my mind)" in text
    assert "run cancelled, compensating completed steps (latest first)" in text
    assert "step hold:compensate (reverses s1) failed: FatalError: offline" in text
    assert "compensation stuck: reversing step hold failed: FatalError: offline" in text
    assert f"wayline runs resume-compensation {RUN} --world sqlite:////w.db" in text
    assert f"wayline runs abandon-compensation {RUN} --world sqlite:////w.db" in text

    ended = [*events, Event(RUN, 13, T.RUN_CANCELLED, None, {"reason": "x"}, 12.0)]
    assert fold(RUN, ended).hooks["h1"].status == "disposed"


def test_runs_show_names_the_definition_and_a_block() -> None:
    info = RunInfo(
        RUN,
        "w",
        RunStatus.BLOCKED,
        input={"args": []},
        error={"code": "DEFINITION_MISMATCH", "message": "needs workflow 'w' with revision 2"},
        created_at=100.0,
        attributes={
            "revision": 2,
            "definition": {"identity": "ab" * 32, "codeHash": "cd" * 32, "strictIdentity": True},
        },
    )
    out = io.StringIO()
    render_show(info, [], out)
    text = out.getvalue()
    assert f"identity  {'ab' * 8}  code {'cd' * 8} (strict)" in text
    assert "blocked   needs workflow 'w' with revision 2" in text


def test_runs_show_names_the_revision_a_worker_pinned() -> None:
    """A run started by name (``wayline start NAME``, the operator) records no revision at
    creation; its first worker pins one in ``run_started``, and ``runs show`` names it too."""
    pinned = {"identity": "ab" * 32, "revision": 3, "codeHash": "cd" * 32}
    info = RunInfo(RUN, "w", RunStatus.RUNNING, created_at=100.0, attributes={"definition": pinned})
    out = io.StringIO()
    render_show(info, [], out)
    assert "workflow  w (revision 3)" in out.getvalue()


def test_child_runs_are_in_the_timeline() -> None:
    """A child run shows in the parent's timeline (runs show, runs watch, --json): its
    workflow, its run id and how it ended; one the parent never heard back from says so."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.CHILD_CREATED, "c1", {"childRunId": "wf_kid1", "workflow": "kid"}),
        (101.7, T.CHILD_COMPLETED, "c1", {"status": "completed", "output": 3}),
        (101.8, T.CHILD_CREATED, "c2", {"childRunId": "wf_kid2", "workflow": "slow_kid"}),
        (102.0, T.RUN_CANCEL_REQUESTED, None, {"reason": "no"}),
        (102.1, T.RUN_CANCELLED, None, {"reason": "no"}),
    )
    info = RunInfo(
        RUN, "w", RunStatus.CANCELLED, created_at=100.0, started_at=100.1, ended_at=102.1
    )
    out = io.StringIO()
    render_show(info, events, out)
    lines = [line.strip() for line in out.getvalue().splitlines()]
    first = lines.index(next(line for line in lines if "child kid " in line))
    assert lines[first].endswith("completed after 1.50 s")
    assert lines[first + 1] == "run wf_kid1"
    assert any(
        "child slow_kid" in line and "not reported (the run ended)" in line for line in lines
    )
    assert "run wf_kid2" in lines
    children = fold(RUN, events).to_json()["children"]
    assert [(c["runId"], c["status"]) for c in children] == [
        ("wf_kid1", "completed"),
        ("wf_kid2", "running"),
    ]
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(events)
    said = live.getvalue()
    assert "child kid started: wf_kid1" in said and "child kid completed" in said
    assert "child slow_kid started: wf_kid2" in said


def test_an_abandoned_attempt_shows_no_duration() -> None:
    """NATS: the worker SIGKILLed 1.5 s into a 3 s body, the step taken over 27 s later;
    SQLite: a body cut off at shutdown, its step out of attempts at recovery. Neither attempt
    ran for the time until recovery: no end was recorded, so no duration is shown."""
    taken_over = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.STEP_CREATED, "s1", {"stepName": "slow"}),
        (100.2, T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}),
        (127.2, T.STEP_STARTED, "s1", {"attempt": 2, "ownerMessageId": "m1"}),
        (130.2, T.STEP_COMPLETED, "s1", {"result": 1}),
        (130.3, T.RUN_COMPLETED, None, {"output": 1}),
    )
    info = RunInfo(
        RUN, "w", RunStatus.COMPLETED, created_at=100.0, started_at=100.1, ended_at=130.3
    )
    out = io.StringIO()
    render_show(info, taken_over, out)
    text = out.getvalue()
    assert "attempt 1: abandoned (no end recorded; started +200 ms)" in text
    assert "27.00 s" not in text
    assert "attempt 2: completed after 3.00 s" in text
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(taken_over)
    said = live.getvalue()
    assert "step slow started (attempt 2; attempt 1 abandoned, no end recorded)" in said
    assert "step slow completed in 3.00 s" in said
    given_up = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.STEP_CREATED, "s1", {"stepName": "slow"}),
        (100.2, T.STEP_STARTED, "s1", {"attempt": 1, "ownerMessageId": "m1"}),
        (
            108.95,
            T.STEP_FAILED,
            "s1",
            {
                "error": {
                    "name": "FatalError",
                    "code": "MAX_ATTEMPTS_EXCEEDED",
                    "message": "step 'slow' did not finish in 1 attempt (its invocations died)",
                }
            },
        ),
        (109.0, T.RUN_FAILED, None, {"error": {"code": "STEP_FAILED", "message": "x"}}),
    )
    info = RunInfo(
        RUN,
        "w",
        RunStatus.FAILED,
        created_at=100.0,
        started_at=100.1,
        ended_at=109.0,
        error={"code": "STEP_FAILED", "message": "x"},
    )
    out = io.StringIO()
    render_show(info, given_up, out)
    text = out.getvalue()
    assert "attempt 1: abandoned (no end recorded; started +200 ms)" in text
    assert "failed after" not in text
    assert "gave up: [MAX_ATTEMPTS_EXCEEDED] FatalError: step 'slow' did not finish" in text
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(given_up)
    said = live.getvalue()
    assert "step slow attempt 1 abandoned (no end recorded)" in said
    assert "step slow failed: [MAX_ATTEMPTS_EXCEEDED]" in said


def test_a_hook_timed_out_early_says_so() -> None:
    """``wayline runs wake --wait h1.timeout`` times a hook out before its time: the timeline
    marks it woken early, as it does a sleep (its ``wait_completed`` says ``early``)."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.HOOK_CREATED, "h1", {"token": "approve:1"}),
        (100.2, T.WAIT_CREATED, "h1.timeout", {"resumeAt": 3700.1}),
        (105.0, T.WAIT_COMPLETED, "h1.timeout", {"resumeAt": 3700.1, "early": True}),
        (105.1, T.HOOK_DISPOSED, "h1", {}),
    )
    view = fold(RUN, events)
    assert view.hooks["h1"].status == "timed out"
    assert view.to_json()["hooks"][0]["timedOutEarly"] is True
    info = RunInfo(RUN, "w", RunStatus.RUNNING, created_at=100.0, started_at=100.1)
    out = io.StringIO()
    render_show(info, events, out)
    [line] = [ln for ln in out.getvalue().splitlines() if "hook approve:1" in ln]
    assert line.rstrip().endswith("timed out (woken early)")
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(events)
    assert "hook approve:1 timed out (woken early)" in live.getvalue()
    # on time: no mark
    on_time = log(*[(e.created_at, e.type, e.correlation_id, dict(e.data)) for e in events])
    on_time[4] = Event(RUN, 5, T.WAIT_COMPLETED, "h1.timeout", {"resumeAt": 3700.1}, 3700.2)
    assert fold(RUN, on_time).to_json()["hooks"][0]["timedOutEarly"] is False
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(on_time)
    assert "hook approve:1 timed out\n" in live.getvalue()


def test_every_payload_a_hook_received_is_shown() -> None:
    """A hook takes payloads until it is disposed: a second one (a person resuming again)
    is in the log, so ``runs show``, its JSON and the live timeline show it with its own
    payload (the live line repeated the first payload; show listed only the first)."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.HOOK_CREATED, "h1", {"token": "approve:1"}),
        (102.0, T.HOOK_RECEIVED, "h1", {"payload": {"by": "a"}}),
        (107.0, T.HOOK_RECEIVED, "h1", {"payload": {"by": "b"}}),
    )
    view = fold(RUN, events)
    [hook] = view.to_json()["hooks"]
    assert hook["payload"] == {"by": "a"}
    assert hook["later"] == [{"receivedAt": events[4].created_at, "payload": {"by": "b"}}]
    info = RunInfo(RUN, "w", RunStatus.RUNNING, created_at=100.0, started_at=100.1)
    out = io.StringIO()
    render_show(info, events, out)
    received = [ln.strip() for ln in out.getvalue().splitlines() if "received after" in ln]
    assert len(received) == 2 and received[1].endswith('{"by": "b"}'), received
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(events)
    said = live.getvalue()
    assert 'hook approve:1 received {"by": "a"}' in said
    assert 'hook approve:1 received {"by": "b"}' in said, said


def test_a_childs_deadline_is_shown_as_its_deadline_not_a_sleep() -> None:
    """``child_with(ChildOptions(timeout="1s"), ...)``: the parent never slept; its timeline
    shows the child's deadline (passed: the parent stopped waiting, the child runs on), never
    ``sleep``."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (
            100.2,
            T.CHILD_CREATED,
            "c1",
            {"childRunId": "wf_kid1", "workflow": "kid", "deadline": 101.1},
        ),
        (100.2, T.WAIT_CREATED, "c1.deadline", {"resumeAt": 101.1}),
        (101.2, T.WAIT_COMPLETED, "c1.deadline", {"resumeAt": 101.1}),
        (101.3, T.RUN_COMPLETED, None, {"output": None}),
    )
    info = RunInfo(
        RUN, "w", RunStatus.COMPLETED, created_at=100.0, started_at=100.1, ended_at=101.3
    )
    out = io.StringIO()
    render_show(info, events, out)
    text = out.getvalue()
    assert "sleep" not in text
    lines = [line.strip() for line in text.splitlines()]
    first = lines.index(next(line for line in lines if "child kid " in line))
    assert lines[first + 1] == "run wf_kid1"
    assert lines[first + 2].startswith("deadline 1.00 s passed at +1.20 s")
    live = io.StringIO()
    LiveProgress(live, "sqlite:///w.db").feed(events)
    said = live.getvalue()
    assert "sleep" not in said
    assert "child kid deadline in 1.00 s" in said
    assert "child kid passed its deadline of 1.00 s" in said
    view = fold(RUN, events).to_json()
    assert view["waits"] == []
    [child] = view["children"]
    assert (child["deadlineAt"], child["deadlinePassedAt"]) == (101.1, 101.2)
    # a child that ends first: its deadline was not reached
    done = [*events[:4], Event(RUN, 5, T.CHILD_COMPLETED, "c1", {"status": "completed"}, 100.7)]
    out = io.StringIO()
    render_show(RunInfo(RUN, "w", RunStatus.RUNNING, created_at=100.0), done, out)
    text = out.getvalue()
    assert "sleep" not in text and "deadline 1.00 s (at " in text and "passed" not in text


def test_runs_show_names_each_sleep_by_the_id_runs_wake_takes() -> None:
    info = RunInfo(
        run_id=RUN, workflow="w", status=RunStatus.FAILED, input=None, created_at=100.0,
        started_at=100.1, ended_at=162.9, error={"code": "HOOK_TIMEOUT", "message": "too late"},
    )  # fmt: skip
    out = io.StringIO()
    render_show(info, EVENTS, out)
    [line] = [ln for ln in out.getvalue().splitlines() if " sleep " in ln]
    assert "sleep 30.00 s (id w1)" in line, line


def test_the_payloads_a_story_leaves_out_are_counted_in_plain_words() -> None:
    """The console's story prints some of a hook's payloads (``hook_payloads``, by the hook's
    id) and counts the rest: one left out is "1 more payload", not "1 more payloads"."""
    events = log(
        (100.0, T.RUN_CREATED, None, {"workflow": "w", "input": {"args": []}}),
        (100.1, T.RUN_STARTED, None, {}),
        (100.2, T.HOOK_CREATED, "h1", {"token": "stream:1"}),
        *[(101.0 + n, T.HOOK_RECEIVED, "h1", {"payload": {"n": n}}) for n in range(3)],
    )
    info = RunInfo(RUN, "w", RunStatus.RUNNING, created_at=100.0, started_at=100.1)
    for shares, said in (({"h1": (1, 1)}, "... 1 more payload"), ({}, "... 2 more payloads")):
        out = io.StringIO()
        render_show(info, events, out, hook_payloads=shares)
        lines = [ln.strip() for ln in out.getvalue().splitlines()]
        assert said in lines, out.getvalue()
        printed = [ln for ln in lines if ln.startswith("received after")]
        assert len(printed) == 1 + sum(sum(s) - 1 for s in shares.values()), printed
