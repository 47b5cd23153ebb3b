"""Cron schedules without a clock: parsing (ranges, steps, lists, names, shorthands, bad
input), the next and the last tick in a time zone, daylight-saving transitions, and which
tick is due."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from wayline._core.cron import CronError, due, last_tick, next_tick, parse


def at(text: str, tz: str = "UTC") -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


def wall(seconds: float, tz: str) -> str:
    return datetime.fromtimestamp(seconds, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


def ticks(expr: str, start: str, n: int, tz: str = "UTC") -> list[str]:
    cron, t = parse(expr, tz), at(start, tz)
    out = []
    for _ in range(n):
        nxt = next_tick(cron, t)
        assert nxt is not None
        out.append(wall(nxt, tz))
        t = nxt
    return out


def test_fields_ranges_steps_lists_and_names() -> None:
    cron = parse("1,15,30-40/5 */6 1-7 jan,JUL mon-fri")
    assert sorted(cron.minutes) == [1, 15, 30, 35, 40]
    assert sorted(cron.hours) == [0, 6, 12, 18]
    assert sorted(cron.months) == [1, 7]
    assert sorted(cron.weekdays) == [1, 2, 3, 4, 5]
    assert sorted(parse("0 0 * * 7").weekdays) == [0]  # Sunday is 0 or 7
    assert sorted(parse("5/20 * * * *").minutes) == [5, 25, 45]
    assert parse("@daily").hours == frozenset({0})


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("* * * *", "5 fields"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day of month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day of week"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "outside"),
        ("x * * * *", "not a number"),
        ("0 0 30 feb *", "never fires"),
    ],
)
def test_bad_expressions_are_refused_with_the_reason(expr: str, says: str) -> None:
    with pytest.raises(CronError, match=says):
        parse(expr)


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(CronError, match="Mars/Olympus"):
        parse("* * * * *", "Mars/Olympus")


@pytest.mark.parametrize("name", ["Europe", "America", "x" * 300])
def test_a_time_zone_that_is_a_folder_or_too_long_is_refused(name: str) -> None:
    """Names the zone database cannot open as a file: a region (a folder of zones) or one
    longer than a file name (it raised IsADirectoryError or OSError, past the operator)."""
    with pytest.raises(CronError, match="unknown time zone"):
        parse("* * * * *", name)


def test_next_ticks_in_utc() -> None:
    assert ticks("*/15 * * * *", "2026-01-01 10:07", 3) == [
        "2026-01-01 10:15 UTC",
        "2026-01-01 10:30 UTC",
        "2026-01-01 10:45 UTC",
    ]
    assert ticks("0 9 * * mon", "2026-01-01 00:00", 2) == [  # 2026-01-01 is a Thursday
        "2026-01-05 09:00 UTC",
        "2026-01-12 09:00 UTC",
    ]
    assert ticks("0 0 29 2 *", "2026-01-01 00:00", 1) == ["2028-02-29 00:00 UTC"]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # the 13th, or any Friday (Vixie cron): 2026-02-06 is a Friday, 2026-02-13 both
    assert ticks("0 0 13 * fri", "2026-02-01 00:00", 3) == [
        "2026-02-06 00:00 UTC",
        "2026-02-13 00:00 UTC",
        "2026-02-20 00:00 UTC",
    ]


def test_a_time_zone_moves_the_instant() -> None:
    cron = parse("0 9 * * *", "Europe/Berlin")
    nxt = next_tick(cron, at("2026-01-10 12:00"))
    assert nxt == at("2026-01-11 08:00")  # 09:00 CET is 08:00 UTC
    summer = next_tick(cron, at("2026-07-10 12:00"))
    assert summer == at("2026-07-11 07:00")  # 09:00 CEST is 07:00 UTC


def test_spring_forward_a_wall_time_in_the_gap_runs_once_right_after_it() -> None:
    # Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist
    assert ticks("30 2 * * *", "2026-03-28 00:00", 3, "Europe/Berlin") == [
        "2026-03-28 02:30 CET",
        "2026-03-29 03:00 CEST",
        "2026-03-30 02:30 CEST",
    ]
    # every 15 minutes: the gap's walls collapse onto 03:00, which runs once
    assert ticks("*/15 * * * *", "2026-03-29 01:40", 4, "Europe/Berlin") == [
        "2026-03-29 01:45 CET",
        "2026-03-29 03:00 CEST",
        "2026-03-29 03:15 CEST",
        "2026-03-29 03:30 CEST",
    ]


def test_fall_back_a_repeated_wall_time_runs_once_at_its_first_occurrence() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice
    assert ticks("30 2 * * *", "2026-10-24 00:00", 3, "Europe/Berlin") == [
        "2026-10-24 02:30 CEST",
        "2026-10-25 02:30 CEST",
        "2026-10-26 02:30 CET",
    ]
    hourly = ticks("0 * * * *", "2026-10-25 00:30", 4, "Europe/Berlin")
    assert hourly == [
        "2026-10-25 01:00 CEST",
        "2026-10-25 02:00 CEST",
        "2026-10-25 03:00 CET",  # the second 02:00 (CET) is not run again
        "2026-10-25 04:00 CET",
    ]


def test_ticks_strictly_increase_across_a_year_of_transitions() -> None:
    for tz in ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
        cron, t = parse("0 * * * *", tz), at("2026-01-01 00:00", tz)
        seen = 0
        while t < at("2027-01-01 00:00", tz):
            nxt = next_tick(cron, t)
            # at most the repeated hour (fall back) on top of the hour
            assert nxt is not None and nxt > t and nxt - t <= 7200, (tz, wall(t, tz))
            t, seen = nxt, seen + 1
        assert 365 * 24 - 2 <= seen <= 365 * 24, tz  # a gap's and an overlap's hour


def test_last_tick_is_at_or_before() -> None:
    cron = parse("0 */2 * * *")
    assert last_tick(cron, at("2026-05-05 05:59")) == at("2026-05-05 04:00")
    assert last_tick(cron, at("2026-05-05 06:00")) == at("2026-05-05 06:00")
    yearly = parse("@yearly")
    assert last_tick(yearly, at("2026-05-05 05:59")) == at("2026-01-01 00:00")


def test_due_runs_only_the_latest_missed_tick_within_the_deadline() -> None:
    cron = parse("* * * * *")
    since = at("2026-05-05 10:00")
    assert due(cron, since, at("2026-05-05 10:00:30")) is None  # nothing after since yet
    assert due(cron, since, at("2026-05-05 10:01:00")) == at("2026-05-05 10:01")
    assert due(cron, since, at("2026-05-05 10:09:10")) == at("2026-05-05 10:09")  # 9 missed
    assert due(cron, since, at("2026-05-05 10:09:50"), deadline=30) is None  # 50 s late
    assert due(cron, since, at("2026-05-05 10:09:20"), deadline=30) == at("2026-05-05 10:09")


def test_instants_are_utc_based() -> None:
    # a tick's instant is whole minutes since the epoch whatever the zone (it names the run)
    cron = parse("*/5 * * * *", "Asia/Kolkata")  # +05:30
    nxt = next_tick(cron, datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert nxt is not None and nxt % 60 == 0 and nxt % 300 == 0


def test_ticks_at_the_ends_of_the_calendar_are_found_or_none_never_an_error() -> None:
    """The calendar (``datetime``) holds the years 1 to 9999: a search that runs off it finds
    no tick there, in any time zone, instead of raising (a time a person wrote in a schedules
    file or a status may lie anywhere on it, or off it)."""
    minute, yearly = parse("* * * * *"), parse("@yearly")
    assert next_tick(minute, at("9999-12-31 23:58")) == at("9999-12-31 23:59")
    assert next_tick(minute, at("9999-12-31 23:59")) is None
    assert next_tick(yearly, at("9995-06-01 00:00")) == at("9996-01-01 00:00")
    assert next_tick(yearly, at("9999-06-01 00:00")) is None
    # 19:00 on 9999-12-31 in New York is an instant in the year 10000: no tick
    west = parse("* * * * *", "America/New_York")
    assert next_tick(west, at("9999-12-31 18:58", "America/New_York")) == at("9999-12-31 23:59")
    assert next_tick(west, at("9999-12-31 18:59", "America/New_York")) is None
    assert last_tick(minute, at("9999-12-31 23:59:30")) == at("9999-12-31 23:59")
    assert last_tick(minute, at("0001-01-01 02:00")) == at("0001-01-01 02:00")
    assert last_tick(minute, at("0001-01-01 00:30")) is None  # its look back leaves the calendar
    for off in (1e20, -1e20, float("nan"), float("inf")):
        assert next_tick(minute, off) is None and last_tick(minute, off) is None
        assert due(minute, 0.0, off) is None
