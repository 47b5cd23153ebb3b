"""``wayline schedules`` against scenarios from its peers' own suites (Kubernetes CronJob's
e2e, Temporal's schedule tests) and adversarial ones: a scheduler that dies between starting a
tick's run and recording it, clock jumps both ways (over a hundred missed ticks), a cron or
time zone broken by hand in the schedules file, Forbid buffering a tick until the live run
ends (within the starting deadline), and a schedule removed while its run is live.

Times are fixed with ``run --once --now`` or by shifting the schedules' clock
(``WAYLINE_SCHEDULE_CLOCK_*``): no test waits for the wall clock."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.cli.conftest import FLOWS, Background, Cli

pytestmark = pytest.mark.timeout(90)
DAY = 86400.0


def _add(cli: Cli, name: str, *extra: str, **env: str) -> None:
    done = cli.here(
        "schedules", "add", name, "--workflow", "add", "--input", "[1, 2]", *extra, **env
    )
    assert done.returncode == 0, done.stderr


def _look(cli: Cli, now: str | None = None, **env: str) -> str:
    at = ("--now", now) if now is not None else ()
    done = cli.here("schedules", "run", "--once", *at, **env)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def _runs(cli: Cli) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = cli.json("runs", "list")
    return runs


def _all_ended(cli: Cli, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while live := [r for r in _runs(cli) if r["status"] not in ("completed", "cancelled")]:
        assert time.monotonic() < deadline, live
        time.sleep(0.2)


def _shifted(seconds: float) -> dict[str, str]:
    """The schedules' clock ``seconds`` off the real one (a jump): it runs at the real rate to a
    millionth, from an origin put so far back that it is ``seconds`` ahead (or behind)."""
    rate = 1.0 + (1e-6 if seconds > 0 else -1e-6)
    origin = time.time() - abs(seconds) * 1e6
    return {
        "WAYLINE_SCHEDULE_CLOCK_RATE": repr(rate),
        "WAYLINE_SCHEDULE_CLOCK_ORIGIN": repr(origin),
    }


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds // 60 * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_scheduler_stopped_before_it_recorded_its_tick_starts_no_second_run(
    cli: Cli, world_url: str
) -> None:
    """A tick must start at most one run: a scheduler killed after it started the tick's run
    (and, under Replace, cancelled the previous one) but before it wrote the file is replaced
    by one that looks at the same tick with the older file. The tick's run id is the same, so
    it starts nothing new and says so."""
    _add(cli, "r", "--cron", "0 * * * *", "--concurrency-policy", "Replace")
    first = _look(cli, "2099-01-01T10:05:00+00:00")  # no worker: the run stays live
    assert "r: tick 2099-01-01T10:00:00Z started wf_" in first
    previous = first.split()[-1]
    file = cli.cwd / ".wayline" / "schedules.json"
    before = file.read_text()
    second = _look(cli, "2099-01-01T11:05:00+00:00")
    assert f"(cancelled {previous}, still running)" in second
    replacement = second.split()[4]
    file.write_text(before)  # that look's write is lost: the process died just before it
    again = _look(cli, "2099-01-01T11:05:00+00:00")
    assert again.strip() == f"r: tick 2099-01-01T11:00:00Z had its run {replacement} already"
    assert sorted(str(r["runId"]) for r in _runs(cli)) == sorted([previous, replacement])
    assert _look(cli, "2099-01-01T11:05:00+00:00") == ""  # recorded now: nothing more to say


def test_a_clock_jump_forward_starts_the_latest_missed_tick_once_and_back_starts_none(
    cli: Cli,
) -> None:
    """CronJob's "more than 100 missed schedules": a scheduler whose clock jumps two days ahead
    starts one run, of the latest tick, for a daily and for a minutely schedule (2,880 missed).
    The clock set back a day starts nothing again (no tick runs twice), and ``list`` gives the
    next tick it will really start, after the last one; a day ahead of that, one more each."""
    at = time.time() - 6 * 3600  # the daily tick, 6 hours ago: far from any boundary
    daily = time.gmtime(at)
    _add(cli, "daily", "--cron", f"{daily.tm_min} {daily.tm_hour} * * *", **_shifted(-2 * DAY))
    _add(cli, "minutely", "--cron", "* * * * *", **_shifted(-2 * DAY))
    said = _look(cli)  # two days later
    assert f"daily: tick {_stamp(at)} started wf_" in said, said
    assert said.count("minutely: tick") == 1 and "started" in said, said
    ran = len(_runs(cli))
    assert _look(cli, **_shifted(-DAY)) == ""  # a day back: nothing is due again
    shown = cli.here("schedules", "list", "--json", **_shifted(-DAY))
    listed = {e["name"]: e for e in json.loads(shown.stdout)}
    assert listed["daily"]["next"] == _stamp(at + DAY), listed
    assert len(_runs(cli)) == ran
    said = _look(cli, **_shifted(DAY))
    assert f"daily: tick {_stamp(at + DAY)} started" in said and said.count("started") == 2, said
    assert len(_runs(cli)) == ran + 2


def test_a_cron_or_zone_broken_in_the_file_is_said_once_and_the_others_still_run(
    cli: Cli,
) -> None:
    """The schedules file is configuration a person may edit: a schedule whose cron or time
    zone no longer parses is said (once) and not scheduled, the others go on, ``list`` shows
    it, and a fixed one schedules again (the resource's InvalidSpec, for the file)."""
    for name in ("good", "cron", "zone"):
        _add(cli, name, "--cron", "0 * * * *")
    file = cli.cwd / ".wayline" / "schedules.json"
    schedules = json.loads(file.read_text())
    schedules["cron"]["cron"] = "61 * * * *"
    schedules["zone"]["timeZone"] = "Mars/Olympus"
    file.write_text(json.dumps(schedules))
    said = dict(
        line.split(": ", 1) for line in _look(cli, "2099-01-01T10:05:00+00:00").splitlines()
    )
    assert sorted(said) == ["cron", "good", "zone"] and "started" in said["good"], said
    assert said["cron"].startswith("not scheduled: minute: '61' is outside 0-59"), said
    assert said["zone"].startswith("not scheduled: unknown time zone 'Mars/Olympus'"), said
    assert "started" in _look(cli, "2099-01-01T11:05:00+00:00")  # the broken ones said once
    listed = cli.here("schedules", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "minute: '61'" in listed.stdout and "Mars/Olympus" in listed.stdout, listed.stdout
    schedules = json.loads(file.read_text())
    schedules["cron"]["cron"] = "0 * * * *"
    file.write_text(json.dumps(schedules))
    said = _look(cli, "2099-01-01T12:05:00+00:00").splitlines()
    assert sorted(line.split(":")[0] for line in said if "started" in line) == ["cron", "good"]
    assert not any(line.startswith("zone") for line in said), said  # said once already
    assert len(_runs(cli)) == 4


def test_a_schedules_file_of_the_wrong_shape_is_an_error_line_not_a_traceback(cli: Cli) -> None:
    """A file edited by hand, or another file given as ``--file``: a file that is not an
    object of schedules is refused in one line (exit 2); a schedule missing a field, or with a
    field of the wrong type, is not scheduled (said once, shown by ``list``) and the others go
    on, as for a broken cron."""
    from tests.cli.test_cli import assert_clean_error

    order = cli.cwd / "order.json"
    order.write_text('[{"sku": "BOOK-42"}]')
    for command in (("list",), ("run", "--once"), ("remove", "x")):
        done = cli.here("schedules", "--file", str(order), *command)
        assert_clean_error(done, "order.json", "not a JSON object of schedules by name")
    order.write_text('{"x": 5}')
    assert_clean_error(cli.here("schedules", "--file", str(order), "list"), "schedule 'x'")

    for name in ("good", "nocron", "created", "input"):
        _add(cli, name, "--cron", "0 * * * *")
    file = cli.cwd / ".wayline" / "schedules.json"
    schedules = json.loads(file.read_text())
    del schedules["nocron"]["cron"]
    schedules["created"]["created"] = "yesterday"
    schedules["input"]["input"] = "{"
    file.write_text(json.dumps(schedules))
    said = dict(
        line.split(": ", 1) for line in _look(cli, "2099-01-01T10:05:00+00:00").splitlines()
    )
    assert "started" in said.pop("good"), said
    assert said == {
        "nocron": "not scheduled: 'cron' is missing (fix it in the schedules file)",
        "created": "not scheduled: 'created' is not a number (fix it in the schedules file)",
        "input": "not scheduled: 'input' is not JSON (Expecting property name enclosed in "
        "double quotes at position 1) (fix it in the schedules file)",
    }
    again = _look(cli, "2099-01-01T11:05:00+00:00")  # the broken ones said once
    assert [line.split(":")[0] for line in again.splitlines()] == ["good"], again
    listed = cli.here("schedules", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("nocron "))
    assert row.endswith("  not scheduled: 'cron' is missing"), listed.stdout
    assert "'created' is not a number" in listed.stdout, listed.stdout


def test_forbid_runs_a_skipped_tick_late_when_the_run_ends_unless_past_its_deadline(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    """CronJob's Forbid and Temporal's buffered overlap: a tick skipped while the previous run
    is live stays due, and runs when that run ends, unless it is later than the starting
    deadline by then (then it is missed, said once). Removing a schedule while its run is live
    (Temporal: a schedule deleted while its workflow runs) leaves the run alone."""
    _add(cli, "late", "--cron", "0 * * * *", "--concurrency-policy", "Forbid")
    _add(cli, "strict", "--cron", "0 * * * *", "--concurrency-policy", "Forbid",
         "--starting-deadline", "120")  # fmt: skip
    _add(cli, "gone", "--cron", "0 * * * *")
    first = _look(cli, "2099-01-01T10:00:30+00:00")  # no worker yet: the runs stay live
    assert first.count("started") == 3, first
    said = _look(cli, "2099-01-01T11:00:30+00:00")
    assert said.count("skipped") == 2 and "gone: tick 2099-01-01T11:00:00Z started" in said
    assert cli.here("schedules", "remove", "gone").returncode == 0
    spawn("worker", "--app", str(FLOWS)).wait_for("ready on")
    _all_ended(cli)
    said = _look(cli, "2099-01-01T11:05:00+00:00")
    assert "late: tick 2099-01-01T11:00:00Z started" in said, said
    assert said.count("strict: tick 2099-01-01T11:00:00Z missed: 300s late") == 1, said
    assert not any(line.startswith("gone") for line in said.splitlines()), said
    assert len(_runs(cli)) == 5  # three first runs, gone's second, late's buffered one
