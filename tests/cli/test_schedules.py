"""``wayline schedules`` on both worlds: a tick starts one run however many schedulers look
(in parallel processes, or again), only the latest missed tick runs, Forbid skips and Replace
cancels, bad input is refused with the reason. Times are fixed with ``run --once --now``.
A one-shot command runs in this process (``Cli.here``); the schedulers that look at once, the
looping scheduler and the worker are processes of their own."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.cli.conftest import FLOWS, Background, Cli
from tests.lost_cancels import ends_on_its_cancel, losing_its_cancel

pytestmark = pytest.mark.timeout(90)


def _add(cli: Cli, name: str, *extra: str) -> None:
    done = cli.here("schedules", "add", name, "--workflow", "add", "--input", "[1, 2]", *extra)
    assert done.returncode == 0, done.stderr


def _look(cli: Cli, now: str) -> str:
    done = cli.here("schedules", "run", "--once", "--now", now)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _runs(cli: Cli) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = cli.json("runs", "list")
    return runs


def test_a_tick_starts_one_run_however_many_schedulers_look(cli: Cli, world_url: str) -> None:
    _add(cli, "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin")
    # 2099-03-29 is a spring-forward day in Berlin: 02:30 does not exist, it runs at 03:00
    said = _look(cli, "2099-03-29T12:00:00+00:00")
    assert "tick 2099-03-29T01:00:00Z started wf_" in said
    assert _look(cli, "2099-03-29T12:00:00+00:00") == ""  # looked again: nothing new
    # two schedulers at once, three days of missed ticks: one run, of the latest tick
    procs = [
        cli.popen("schedules", "run", "--once", "--now", "2099-04-02T06:00:00+00:00")
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        assert p.stdout is not None
        with p.stdout:
            outs.append(p.stdout.read().decode())
    assert [p.wait(30) for p in procs] == [0, 0]
    runs = _runs(cli)
    assert len(runs) == 2 and {r["workflow"] for r in runs} == {"add"}
    assert any("tick 2099-04-02T00:30:00Z started" in out for out in outs), outs
    listed = json.loads(cli.here("schedules", "list", "--json").stdout)
    # a --now ahead of the clock is a rehearsal: kept apart, not the schedule's last tick
    assert listed[0]["name"] == "nightly" and listed[0].get("lastTick") is None
    assert listed[0]["rehearsal"]["lastTick"] is not None
    assert listed[0]["next"] < "2099"  # the scheduler on the clock starts its own ticks
    cells, row = _table(cli.here("schedules", "list").stdout)
    assert cells["LAST TICK"] == "-" and cells["NEXT TICK"] < "2099", cells
    assert row.endswith("(rehearsed to 2099-04-02T00:30:00Z)"), row


def test_forbid_skips_and_replace_cancels(cli: Cli, world_url: str) -> None:
    _add(cli, "f", "--cron", "0 * * * *", "--concurrency-policy", "Forbid")
    _add(cli, "r", "--cron", "0 * * * *", "--concurrency-policy", "Replace")
    first = _look(cli, "2099-01-01T10:05:00+00:00")  # no worker: both first runs stay live
    ids = dict(line.split(": ")[0:1] + line.split()[-1:] for line in first.splitlines())
    said = _look(cli, "2099-01-01T11:05:00+00:00")
    assert "f: tick 2099-01-01T11:00:00Z skipped" in said
    assert "r: tick 2099-01-01T11:00:00Z started" in said
    assert f"(cancelled {ids['r']}, still running)" in said
    runs = {str(r["runId"]): r for r in _runs(cli)}
    assert len(runs) == 3  # f's first; r's first and its replacement
    # r's first run got its cancellation recorded; f's was left alone
    assert runs[ids["r"]]["updatedAt"] > runs[ids["r"]]["createdAt"]  # type: ignore[operator]
    assert runs[ids["f"]]["updatedAt"] == runs[ids["f"]]["createdAt"]


def test_a_looping_scheduler_says_a_forbid_skip_once_per_tick(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    """``schedules run`` looks every second: a tick that Forbid skips is said once, not at
    every look while the previous run is live."""
    cli.env["WAYLINE_SCHEDULE_CLOCK_RATE"] = "20"  # a minute in 3 s: ~3 looks at each tick
    cli.env["WAYLINE_SCHEDULE_CLOCK_ORIGIN"] = repr(time.time())
    _add(cli, "fb", "--cron", "* * * * *", "--concurrency-policy", "Forbid")
    runner = spawn("schedules", "run")  # no worker: the first tick's run stays pending
    deadline = time.monotonic() + 30
    while True:
        lines = runner.output()[0].splitlines()
        skipped = [line for line in lines if "skipped" in line]
        if len({line.split()[2] for line in skipped}) >= 3:  # three ticks skipped
            break
        assert time.monotonic() < deadline, runner.output()
        time.sleep(0.1)
    runner.stop()
    assert len(skipped) == len(set(skipped)), lines
    assert sum("started" in line for line in lines) == 1, lines
    assert len(_runs(cli)) == 1


def test_starting_deadline_skips_a_late_tick(cli: Cli, world_url: str) -> None:
    _add(cli, "d", "--cron", "0 * * * *", "--starting-deadline", "60")
    said = _look(cli, "2099-01-01T10:05:00+00:00")  # 5 minutes late: missed, said once
    assert said.strip() == (
        "d: tick 2099-01-01T10:00:00Z missed: 300s late, past its starting deadline of 60s"
    )
    assert _look(cli, "2099-01-01T10:05:01+00:00") == ""
    assert "started" in _look(cli, "2099-01-01T11:00:30+00:00")
    assert len(_runs(cli)) == 1


def test_a_now_ahead_of_the_clock_does_not_hold_back_the_real_schedule(cli: Cli) -> None:
    """``run --once --now`` later than the clock is a rehearsal: it starts that tick's run
    (once, however often it looks) but does not become the schedule's last tick, so the
    scheduler on the real clock still starts the ticks that come before it."""
    cli.env["WAYLINE_SCHEDULE_CLOCK_RATE"] = "60"  # a minute of the schedules' clock a second
    cli.env["WAYLINE_SCHEDULE_CLOCK_ORIGIN"] = repr(time.time())
    _add(cli, "every", "--cron", "* * * * *")
    said = _look(cli, "2099-01-01T10:00:30+00:00")
    assert "every: tick 2099-01-01T10:00:00Z started wf_" in said
    assert _look(cli, "2099-01-01T10:00:40+00:00") == ""  # looked again: nothing new
    (listed,) = cli.json("schedules", "list")
    assert listed.get("lastTick") is None and listed["next"] < "2099", listed
    assert _table(cli.here("schedules", "list").stdout)[0]["LAST TICK"] == "-"
    time.sleep(1.5)  # 90 s of the schedules' clock: a real tick has come
    real = cli.here("schedules", "run", "--once")
    assert real.returncode == 0 and "started" in real.stdout, real
    assert len(_runs(cli)) == 2
    (listed,) = cli.json("schedules", "list")
    assert listed["lastTick"] is not None and listed["next"] < "2099", listed


def test_an_input_from_a_file_is_kept_as_its_text(cli: Cli) -> None:
    """``--input @PATH`` (``@-``: standard input) is read when the schedule is added: its
    ticks start with that JSON even once the file is gone."""
    (cli.cwd / "in.json").write_text("[\n  4,\n  5\n]\n")
    done = cli.here("schedules", "add", "a", "--cron", "0 * * * *", "--workflow", "add",
               "--input", "@in.json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (cli.cwd / "in.json").unlink()
    piped = cli.here("schedules", "add", "b", "--cron", "0 * * * *", "--workflow", "add",
                "--input", "@-", stdin='"solo"')  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    stored = {e["name"]: e["input"] for e in cli.json("schedules", "list")}
    assert json.loads(stored["a"]) == [4, 5] and stored["b"] == '"solo"'
    assert _look(cli, "2099-01-01T10:05:00+00:00").count("started") == 2
    inputs = [cli.json("runs", "show", str(r["runId"]))["input"] for r in _runs(cli)]
    assert sorted(map(json.dumps, inputs)) == ['{"args": ["solo"]}', '{"args": [4, 5]}']


def test_add_warns_when_no_live_worker_serves_the_workflow(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    """A workflow no live worker serves is added (workers may come later), with a warning on
    standard error naming it: its ticks' runs would wait. No world yet: nothing said, and no
    world made."""
    early = cli.here("schedules", "add", "early", "--cron", "@hourly", "--workflow", "add")
    assert early.returncode == 0 and early.stdout == "early\n", early
    assert early.stderr == "", early.stderr
    assert not (cli.cwd / "w.db").exists()
    spawn("worker", "--app", str(FLOWS)).wait_for("ready on")
    served = cli.here("schedules", "add", "served", "--cron", "@hourly", "--workflow", "add")
    assert served.returncode == 0 and served.stderr == "", served.stderr
    typo = cli.here("schedules", "add", "typo", "--cron", "@hourly", "--workflow", "ad")
    assert typo.returncode == 0 and typo.stdout == "typo\n", typo
    assert "warning" in typo.stderr and "'ad'" in typo.stderr, typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1, typo.stderr
    assert [e["name"] for e in cli.json("schedules", "list")] == ["early", "served", "typo"]


def test_bad_input_is_refused_with_the_reason(cli: Cli) -> None:
    bad = cli.here("schedules", "add", "x", "--cron", "61 * * * *", "--workflow", "add")
    assert bad.returncode == 2 and "minute" in bad.stderr
    zone = cli.here(
        "schedules", "add", "x", "--cron", "* * * * *", "--tz", "Mars/X", "--workflow", "a"
    )
    assert zone.returncode == 2 and "Mars/X" in zone.stderr
    js = cli.here("schedules", "add", "x", "--cron", "* * * * *", "--workflow", "a", "--input", "{")
    assert js.returncode == 2 and "--input" in js.stderr
    late = cli.here("schedules", "add", "x", "--cron", "* * * * *", "--workflow", "a",
               "--starting-deadline", "-5")  # fmt: skip
    assert late.returncode == 2 and "--starting-deadline" in late.stderr
    assert "Traceback" not in late.stderr
    _add(cli, "x", "--cron", "* * * * *")
    again = cli.here("schedules", "add", "x", "--cron", "* * * * *", "--workflow", "a")
    assert again.returncode == 2 and "exists" in again.stderr
    assert cli.here("schedules", "remove", "x").returncode == 0
    gone = cli.here("schedules", "remove", "x")
    assert gone.returncode == 2 and "no schedule" in gone.stderr


def test_a_now_that_is_not_a_time_is_refused_in_one_line(cli: Cli) -> None:
    from tests.cli.test_cli import assert_clean_error

    done = cli.here("schedules", "run", "--once", "--now", "tomorrow")
    assert_clean_error(done, "--now 'tomorrow'", "ISO 8601")
    looping = cli.here("schedules", "run", "--now", "2099-04-02T06:00:00+00:00")
    assert_clean_error(looping, "--now needs --once")


@pytest.mark.parametrize(
    "now",
    [
        "9999-12-31T23:59:00",
        "0001-01-01T00:00:00",
        "9999-12-31T23:59:00-01:00",  # an instant in the year 10000
        "0001-01-01T00:00:00+01:00",  # an instant in the year 0
        "1969-12-31T23:59:59+00:00",
    ],
)
def test_a_now_outside_the_span_schedules_are_looked_at_is_refused_in_one_line(
    cli: Cli, now: str
) -> None:
    """A schedule's ticks are computed from the epoch up to 9990-01-01, 9 years (its search
    ahead) before the calendar ends: a --now beyond is refused, and nothing is started."""
    from tests.cli.test_cli import assert_clean_error

    _add(cli, "every", "--cron", "* * * * *")
    path = cli.cwd / ".wayline" / "schedules.json"
    before = path.read_text()
    done = cli.here("schedules", "run", "--once", "--now", now)
    assert_clean_error(done, f"--now {now!r} is out of range", "9990-01-01T00:00:00Z")
    assert path.read_text() == before  # refused before anything is looked at or written
    assert not (cli.cwd / "w.db").exists()
    assert "every" in _look(cli, "9989-12-31T23:59:00+00:00")  # the span's end is looked at


def test_a_time_off_the_calendar_in_the_schedules_file_is_said_not_raised(cli: Cli) -> None:
    """A hand-edited time the calendar does not hold (``lastTick`` 1e300) leaves its schedule
    unscheduled with the reason, in ``list`` and ``run``; the others still run."""
    _add(cli, "edited", "--cron", "* * * * *")
    _add(cli, "kept", "--cron", "* * * * *")
    path = cli.cwd / ".wayline" / "schedules.json"
    stored = json.loads(path.read_text())
    stored["edited"]["lastTick"] = 1e300
    stored["kept"]["rehearsal"] = {"lastTick": 253402300740.0}  # 9999-12-31T23:59:00Z: kept
    path.write_text(json.dumps(stored))
    listed = cli.here("schedules", "list")
    assert listed.returncode == 0, listed.stderr
    assert "'lastTick' is not a time between the years 1 and 9999" in listed.stdout
    assert "rehearsed to 9999-12-31T23:59:00Z" in listed.stdout
    said = _look(cli, "2099-04-02T06:00:00+00:00")
    assert "edited: not scheduled: 'lastTick'" in said


def test_a_looping_scheduler_outlives_a_nats_restart(
    cli: Cli, spawn: Callable[..., Background], nats_server_own: Any
) -> None:
    """``schedules run`` is a long-lived process: its world going away (NATS restarting) is
    said once per schedule, not a traceback that stops every schedule, and once the server is
    back the due tick starts, once."""
    cli.world = nats_server_own.url
    cli.env["WAYLINE_SCHEDULE_CLOCK_RATE"] = "60"  # a minute of the schedules' clock a second
    cli.env["WAYLINE_SCHEDULE_CLOCK_ORIGIN"] = repr(time.time())
    _add(cli, "every", "--cron", "* * * * *")
    runner = spawn("schedules", "run")

    def started() -> list[str]:
        return [line for line in runner.output()[0].splitlines() if " started wf_" in line]

    _until(lambda: len(started()) >= 1, runner)
    nats_server_own.stop()
    runner.wait_for("every: not looked at:", timeout=60)
    assert runner.proc.poll() is None, runner.output()
    nats_server_own.start()
    before = len(started())
    _until(lambda: len(started()) >= before + 2, runner)  # ticks start again
    _, err = runner.output()
    assert err.count("every: not looked at:") == 1, err
    assert "every: the world answers again" in err
    assert "Traceback" not in err
    runner.stop()
    ticks = [line.split()[2] for line in started()]
    assert len(ticks) == len(set(ticks)), ticks  # each tick started once
    runs = _runs(cli)
    assert len(runs) == len({str(r["runId"]) for r in runs}) >= len(ticks)


def _until(done: Callable[[], bool], runner: Background, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert runner.proc.poll() is None, runner.output()
        assert time.monotonic() < deadline, runner.output()
        time.sleep(0.1)


def _table(out: str) -> tuple[dict[str, str], str]:
    """The first row of ``schedules list``, by its header's columns (aligned), and the row."""
    lines = out.splitlines()
    assert lines and lines[0].startswith("NAME  "), out
    header, row = lines[0], lines[1]
    names = re.findall(r"\S+(?: \S+)*", header)
    starts = [header.index(name) for name in names]
    cells = {
        name: row[start : (starts[i + 1] if i + 1 < len(starts) else None)].strip()
        for i, (name, start) in enumerate(zip(names, starts, strict=True))
    }
    return cells, row


async def test_a_looping_scheduler_stops_when_a_look_loses_its_cancel(
    cli: Cli, world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel (Ctrl-C: ``asyncio.run`` cancels the command) that lands just as a world call
    completes can be lost (``asyncio.wait_for`` before Python 3.12, which the NATS client
    uses): the scheduler stops all the same, instead of looking every second for good."""
    import argparse
    import asyncio

    from wayline.cli import schedules

    # a process of its own: this test's loop is running, and the command runs one of its own
    added = cli("schedules", "add", "every", "--cron", "* * * * *", "--workflow", "add")
    assert added.returncode == 0, added.stderr
    in_call = asyncio.Event()
    monkeypatch.setattr(schedules, "_look", losing_its_cancel(schedules._look, in_call))
    path = cli.cwd / ".wayline" / "schedules.json"
    args = argparse.Namespace(world=world_url, file=str(path), once=False, now=None)
    task = asyncio.ensure_future(schedules.cmd_run(args))
    await ends_on_its_cancel(task, in_call, "the scheduler kept looking after its cancel")


def test_listing_or_running_a_schedules_file_that_does_not_exist_makes_nothing(
    cli: Cli, world_url: str
) -> None:
    folder = cli.cwd / "not" / "yet"
    file = str(folder / "schedules.json")
    listed = cli.here("schedules", "--file", file, "list")
    assert listed.returncode == 0 and listed.stdout.strip() == "no schedules", listed
    assert cli.here("schedules", "--file", file, "list", "--json").stdout.strip() == "[]"
    ran = cli.here("schedules", "--file", file, "run", "--once")
    assert ran.returncode == 0 and ran.stdout == "", ran
    assert not (cli.cwd / "not").exists()  # no folder, no file, no lock left behind
    done = cli.here(
        "schedules", "--file", file, "add", "x", "--cron", "* * * * *", "--workflow", "add"
    )
    assert done.returncode == 0, done.stderr
    assert (folder / "schedules.json").exists()
