"""Cron schedules in a time zone, pure: parse a 5-field expression, find the next tick after
a time and the latest tick at or before one, and say which tick is due. No dependency
(``croniter`` is not one of Wayline's); the standard library's ``zoneinfo`` gives the zones.

The fields are minute, hour, day of month, month, day of week, each ``*``, a number, a range
``a-b``, a step ``*/n`` or ``a-b/n`` or ``a/n``, or a list of those (``1,15,30-40/5``);
months and days may be named (``jan``, ``mon-fri``); Sunday is 0 or 7. When both the day of
month and the day of week are restricted, a day matching either runs (as Vixie cron and
Kubernetes CronJob do). ``@hourly``, ``@daily`` (``@midnight``), ``@weekly``, ``@monthly``
and ``@yearly`` (``@annually``) are the usual shorthands.

Daylight saving time, the choice cronie makes (and the one a person expects of "every day at
02:30"): a wall time that does not exist (the spring-forward gap) runs once at the first
instant after the gap; a wall time that happens twice (the fall-back overlap) runs once, at
its first occurrence. So a daily schedule runs exactly once on both transition days, and
ticks are always strictly increasing instants (a tick's instant names its run).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
SEARCH_YEARS = 9
"""How far ahead a tick is looked for: Feb 29 on a given weekday can be 8 years away. A
schedule with no tick in that span (``0 0 30 2 *``) never fires and is refused at parse."""
EARLIEST = 0.0
"""The first instant a schedule is looked at: the epoch (no schedule is created before it)."""
LATEST = datetime(9999 - SEARCH_YEARS, 1, 1, tzinfo=UTC).timestamp()
"""The last instant a schedule is looked at (9990-01-01T00:00:00Z): its next tick is looked for
up to ``SEARCH_YEARS`` ahead, and the calendar (``datetime``) ends with the year 9999."""
_OFF_THE_CALENDAR = (OverflowError, ValueError, OSError)
"""What ``datetime`` raises for a time before the year 1 or after 9999 (``OSError``: past the
platform's ``time_t``)."""


class CronError(ValueError):
    """An expression or time zone that cannot schedule anything; the message says why."""


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month is "*"
    any_weekday: bool  # day of week is "*"
    tz: ZoneInfo
    text: str

    def day_matches(self, d: datetime) -> bool:
        dom, dow = d.day in self.days, (d.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``UTC``, ``Europe/Berlin``); CronError if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as err:
        # OSError: a region (``Europe``, a folder of the database) or a name too long for a file
        raise CronError(f"unknown time zone {name!r} (an IANA name such as Europe/Berlin)") from err


def parse(text: str, tz: str = "UTC") -> Cron:
    """A 5-field cron expression (or a shorthand) in time zone ``tz``; CronError if invalid."""
    fields = MACROS.get(text.strip().lower(), text).split()
    if len(fields) != 5:
        raise CronError(
            f"a schedule is 5 fields (minute hour day-of-month month day-of-week), not {text!r}"
        )
    minute, hour, dom, month, dow = fields
    cron = Cron(
        minutes=_field(minute, 0, 59, (), "minute"),
        hours=_field(hour, 0, 23, (), "hour"),
        days=_field(dom, 1, 31, (), "day of month"),
        months=_field(month, 1, 12, MONTHS, "month", first=1),
        weekdays=frozenset(d % 7 for d in _field(dow, 0, 7, DAYS, "day of week")),
        any_day=dom.startswith("*"),  # "*" and "*/2" as Vixie cron: then both must match
        any_weekday=dow.startswith("*"),
        tz=zone(tz),
        text=text,
    )
    if _next_wall(cron, datetime(2000, 1, 1)) is None:
        raise CronError(f"schedule {text!r} never fires (no such date)")
    return cron


def _field(
    text: str, low: int, high: int, names: tuple[str, ...], what: str, first: int = 0
) -> frozenset[int]:
    out: set[int] = set()
    for part in text.lower().split(","):
        body, _, step_text = part.partition("/")
        step = _number(step_text, names, first, what) if step_text else 1
        if step < 1:
            raise CronError(f"{what}: a step must be 1 or more, not {part!r}")
        if body == "*":
            start, end = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            start, end = _number(a, names, first, what), _number(b, names, first, what)
        else:
            start = _number(body, names, first, what)
            end = high if step_text else start
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise CronError(f"{what}: {part!r} is outside {low}-{high}")
        out.update(range(start, end + 1, step))
    return frozenset(out)


def _number(text: str, names: tuple[str, ...], first: int, what: str) -> int:
    if text in names:
        return names.index(text) + first
    if not text.isdigit():
        raise CronError(f"{what}: {text!r} is not a number or a name")
    return int(text)


def _next_wall(cron: Cron, start: datetime) -> datetime | None:
    """The first naive wall time at or after ``start`` (whole minutes) that matches."""
    t = start.replace(second=0, microsecond=0)
    if t.year + SEARCH_YEARS > datetime.max.year:
        end = datetime.max  # the search stops where the calendar does
    else:
        end = t.replace(year=t.year + SEARCH_YEARS, month=1, day=1)
    while t < end:
        try:
            if t.month not in cron.months:
                t = (t.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0)
            elif not cron.day_matches(t):
                t = (t + timedelta(days=1)).replace(hour=0, minute=0)
            elif t.hour not in cron.hours:
                t = (t + timedelta(hours=1)).replace(minute=0)
            elif t.minute not in cron.minutes:
                t += timedelta(minutes=1)
            else:
                return t
        except OverflowError:  # the next candidate is past 9999-12-31: there is none
            return None
    return None


def instant(wall: datetime, tz: ZoneInfo) -> float:
    """The instant a naive wall time in ``tz`` runs at: its first occurrence if it happens
    twice; the first instant after the gap if it does not exist."""
    first = wall.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall:
        return first.timestamp()
    # in a gap: fold=1 reads it with the offset after the jump, an instant before the gap;
    # the gap's end is the first whole minute from there whose wall time is past ``wall``
    t = int(wall.replace(tzinfo=tz, fold=1).timestamp()) // 60 * 60
    while datetime.fromtimestamp(t, tz).replace(tzinfo=None) < wall:
        t += 60
    return float(t)


def next_tick(cron: Cron, after: float) -> float | None:
    """The first tick strictly after the instant ``after`` (seconds since the epoch); None when
    there is none within ``SEARCH_YEARS`` and the calendar (years 1 to 9999: an instant off it,
    as a time a person wrote in a status or a schedules file, has no tick either)."""
    try:
        return _next_tick(cron, after)
    except _OFF_THE_CALENDAR:
        return None


def _next_tick(cron: Cron, after: float) -> float | None:
    wall = datetime.fromtimestamp(after, cron.tz).replace(tzinfo=None, second=0, microsecond=0)
    # walls map to instants in order (``instant``), and no wall before ``after``'s own maps
    # past it, so the first wall from there whose instant is past ``after`` is the tick
    candidate = _next_wall(cron, wall)
    while candidate is not None:
        at = instant(candidate, cron.tz)
        if at > after:
            return at
        candidate = _next_wall(cron, candidate + timedelta(minutes=1))
    return None


_WINDOWS = (3600.0, 86400.0, 32 * 86400.0, 367 * 86400.0, SEARCH_YEARS * 367 * 86400.0)


def last_tick(cron: Cron, at: float) -> float | None:
    """The latest tick at or before the instant ``at``; None if there is none in the search
    span. Looks back in widening windows, so an every-minute schedule costs a few steps."""
    for window in _WINDOWS:
        # a window reaching before the calendar's first year finds no tick (``next_tick``):
        # the wider ones find none either, so the search ends with None
        tick = next_tick(cron, at - window)
        if tick is None or tick > at:
            continue
        while True:
            following = next_tick(cron, tick)
            if following is None or following > at:
                return tick
            tick = following
    return None


def due(cron: Cron, since: float, now: float, deadline: float | None = None) -> float | None:
    """The tick to run now: the latest tick in ``(since, now]`` (only the latest of several
    missed ones, as Kubernetes CronJob), unless it is more than ``deadline`` seconds old
    (``startingDeadlineSeconds``): then none, the tick is missed."""
    tick = last_tick(cron, now)
    if tick is None or tick <= since:
        return None
    if deadline is not None and now - tick > deadline:
        return None
    return tick
