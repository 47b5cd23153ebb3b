"""The WorkflowSchedule planner without a cluster: history limits never free the name of the
newest tick's run, so a tick whose status write was lost is not planned a second time."""

from __future__ import annotations

from datetime import UTC, datetime

from wayline._core.cron import parse
from wayline_operator.schedule_resource import WorkflowScheduleSpec
from wayline_operator.schedules import OwnedRun, plan, run_name, since

CREATED = "2024-01-01T00:00:30Z"


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_limit_of_zero_keeps_the_newest_ticks_run_when_the_status_was_lost() -> None:
    """Crashes after the tick's run was made and again after each history deletion, before
    any status write: the planner sees only the runs, and must not start the tick again."""
    spec = WorkflowScheduleSpec(schedule="* * * * *", workflow="wf", successfulRunsHistoryLimit=0)
    cron = parse(spec.schedule, spec.timeZone)
    tick = at("2024-01-01T00:01:00")
    runs = [OwnedRun(run_name("s", tick), tick, "completed")]
    created: list[float] = []
    for look in range(3):
        todo = plan(spec, cron, since({}, CREATED, runs), tick + 10 + look, runs)
        if todo.create is not None:
            created.append(todo.create)
        runs = [r for r in runs if r.name not in todo.delete]  # no status is written
    assert created == []
    assert [r.tick for r in runs] == [tick]


def test_a_limit_of_zero_deletes_finished_runs_of_older_ticks() -> None:
    spec = WorkflowScheduleSpec(
        schedule="* * * * *", workflow="wf", successfulRunsHistoryLimit=0, failedRunsHistoryLimit=0
    )
    cron = parse(spec.schedule, spec.timeZone)
    one, two, three = (at(f"2024-01-01T00:0{m}:00") for m in (1, 2, 3))
    runs = [
        OwnedRun(run_name("s", one), one, "completed"),
        OwnedRun(run_name("s", two), two, "failed"),
        OwnedRun(run_name("s", three), three, "completed"),
    ]
    todo = plan(spec, cron, since({}, CREATED, runs), three + 10, runs)
    assert todo.create is None
    assert todo.delete == [run_name("s", one), run_name("s", two)]
    live = [*runs[:2], OwnedRun(run_name("s", three), three, None)]
    todo = plan(spec, cron, since({}, CREATED, live), three + 10, live)
    assert todo.delete == [run_name("s", one), run_name("s", two)]


def test_the_next_tick_is_after_the_handled_one_when_the_clock_is_behind_it() -> None:
    """The clock set back (or a replica's clock behind another's): no tick at or before the
    handled one starts, so ``nextScheduleTime`` is after it, not the clock's next minute."""
    spec = WorkflowScheduleSpec(schedule="* * * * *", workflow="wf")
    cron = parse(spec.schedule, spec.timeZone)
    handled = at("2024-01-02T00:01:00")
    runs = [OwnedRun(run_name("s", handled), handled, "completed")]
    todo = plan(spec, cron, since({}, CREATED, runs), at("2024-01-01T00:05:10"), runs)
    assert todo.create is None and todo.next == handled + 60


def test_a_tick_label_or_status_off_the_calendar_plans_no_tick_and_raises_nothing() -> None:
    """Anyone who may label a WorkflowRun or patch a schedule's status can write a tick past
    the year 9999 (the label is minutes since the epoch): the planner finds no next tick after
    it, as the cron finds none off the calendar, instead of failing every pass."""
    spec = WorkflowScheduleSpec(schedule="* * * * *", workflow="wf")
    cron = parse(spec.schedule, spec.timeZone)
    runs = [owned for owned in [_labelled("9" * 20)] if owned is not None]
    now = at("2026-01-01T00:00:30")
    todo = plan(spec, cron, since({}, CREATED, runs), now, runs)
    assert todo.create is None and todo.next is None
    status = {"lastScheduleTime": "9999-12-31T23:59:00Z"}
    todo = plan(spec, cron, since(status, CREATED, []), now, [])
    assert todo.create is None and todo.next is None


def _labelled(minutes: str) -> OwnedRun | None:
    from wayline_operator.schedules import TICK_LABEL, owned_run

    body = {"metadata": {"name": "s-x", "labels": {TICK_LABEL: minutes}}, "status": {}}
    return owned_run(body)
