"""``wayline schedules``: cron schedules on any world without Kubernetes (the WorkflowSchedule
resource's twin)::

    wayline schedules add NAME --cron '*/5 * * * *' [--tz Europe/Berlin] --workflow W
                          [--input JSON|@PATH] [--concurrency-policy Allow|Forbid|Replace]
                          [--starting-deadline SECONDS]
    wayline schedules list [--json]
    wayline schedules remove NAME
    wayline schedules suspend NAME | resume NAME
    wayline schedules run [--once] [--now ISO-TIME]   start the due ticks (every second)

The schedules are kept in a file (``--file``, default ``.wayline/schedules.json``), not in the
world: the world stays the runs' store, and a schedule is configuration, like a workflow's
code. The file is changed under an exclusive lock (``fcntl``), so schedulers and ``add`` on one
machine do not lose each other's writes.

Exactly once per tick, with any number of schedulers: a tick's run id is derived from the
schedule's name, its creation and the tick (``wf_`` + 32 hex digits of a SHA-256), and
``StartOptions(run_id=...)`` starts a run id only once. As the resource: only the latest
missed tick runs (and none older than ``--starting-deadline``); Forbid skips a tick while the
schedule's previous run is live; Replace cancels it first.

``run --once --now T`` with T ahead of the clock is a rehearsal: the runs it starts are real
(with the tick's run id, so the scheduler starts none again when the tick comes), but its
record is kept apart (``rehearsal``), so the schedule's ``lastTick`` stays and the scheduler on
the clock still starts every tick before T.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._core.cancels import stop_if_cancelled
from .._core.cron import EARLIEST, LATEST, Cron, CronError, due, last_tick, next_tick, parse
from ..client import Client
from ..errors import RunNotFoundError, WaylineError
from ..settings import Settings
from ..start_options import StartOptions
from ..world.registry import ever_served, live_served
from .commands import opened_world
from .loading import UsageError, as_arguments, option_json, parse_json, seconds_arg

POLICIES = ("Allow", "Forbid", "Replace")


@contextlib.contextmanager
def _locked(path: Path, *, create: bool = False) -> Iterator[dict[str, Any]]:
    """The file's schedules by name, to read and change; written back on exit, under a lock.
    A file that does not exist holds none, and only ``create`` (``add``) makes it (its
    folders and its lock too): listing or running no schedules leaves nothing behind."""
    if not create and not path.exists():
        yield {}
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            text = path.read_text() if path.exists() else ""
            schedules: dict[str, Any] = json.loads(text) if text.strip() else {}
        except (OSError, json.JSONDecodeError) as err:
            raise UsageError(f"cannot read schedules from {path}: {err}") from err
        if not isinstance(schedules, dict):
            raise UsageError(
                f"cannot read schedules from {path}: not a JSON object of schedules by name "
                f"(it holds {_json_kind(schedules)}; is --file the schedules file?)"
            )
        for name, entry in schedules.items():
            if not isinstance(entry, dict):
                raise UsageError(
                    f"cannot read schedules from {path}: schedule {name!r} is not a JSON "
                    f"object (it is {_json_kind(entry)})"
                )
        before = json.dumps(schedules, sort_keys=True)
        yield schedules
        if json.dumps(schedules, sort_keys=True) != before:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(schedules, indent=2, sort_keys=True) + "\n")
            tmp.replace(path)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


def tick_run_id(entry: dict[str, Any], tick: float) -> str:
    key = f"schedule:{entry['name']}:{entry['created']}:{int(tick)}"
    return "wf_" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _stamp(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def cmd_add(args: argparse.Namespace) -> int:
    try:
        parse(args.cron, args.tz)
    except CronError as err:
        raise UsageError(str(err)) from err
    # a file (@PATH, @-) is read now and its text kept; bad JSON is refused now, not at a tick
    text, _ = option_json(args.input, "--input")
    with _locked(Path(args.file), create=True) as schedules:
        if args.name in schedules:
            raise UsageError(f"schedule {args.name!r} exists already (remove it first)")
        schedules[args.name] = {
            "name": args.name,
            "cron": args.cron,
            "timeZone": args.tz,
            "workflow": args.workflow,
            "input": text,
            "concurrencyPolicy": args.concurrency_policy,
            "startingDeadlineSeconds": args.starting_deadline,
            "created": Settings.from_env().schedule_now(),
        }
    print(args.name)
    await _warn_unserved(args.workflow, args.world)
    return 0


async def _warn_unserved(workflow: str, url: str) -> None:
    """Warn (on standard error) when no live worker in the world's registry serves the
    workflow: each tick would start a run that waits. Not refused, as a worker may come
    later; a world that cannot be opened (none yet) is not asked, and none is made."""
    try:
        async with opened_world(url, create=False) as world:
            served = await world.list_served()
    except Exception:  # best effort: the schedule is added all the same
        return
    if live_served(workflow, served):
        return
    before = " (one did before)" if ever_served(workflow, served) else ""
    print(
        f"warning: no live worker serves workflow {workflow!r} on {url}{before}: each tick's "
        "run will wait until one does (start one: wayline worker --app MODULE_OR_FILE, or "
        "check the name)",
        file=sys.stderr,
    )


async def cmd_remove(args: argparse.Namespace) -> int:
    with _locked(Path(args.file)) as schedules:
        if schedules.pop(args.name, None) is None:
            raise UsageError(f"no schedule {args.name!r} in {args.file}")
    return 0


class NoSuchSchedule(UsageError):
    """The file has no schedule by the name given."""


def set_suspended(path: Path, name: str, suspended: bool) -> dict[str, Any]:
    """Suspend or resume the schedule ``name``; its entry as it is now. While suspended the
    scheduler starts none of its ticks; once resumed, only the latest tick missed meanwhile
    runs (and not one older than its starting deadline), as for a WorkflowSchedule's
    ``spec.suspend``."""
    with _locked(path) as schedules:
        entry = schedules.get(name)
        if entry is None:
            raise NoSuchSchedule(f"no schedule {name!r} in {path}")
        if suspended:
            entry["suspended"] = True
        else:
            entry.pop("suspended", None)
        return {**entry, "name": name}


async def cmd_suspend(args: argparse.Namespace) -> int:
    set_suspended(Path(args.file), args.name, args.schedules_command == "suspend")
    return 0


def listed(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The schedules of the file, by name, each with its ``next`` tick (``-`` for one that is
    not scheduled, with why in ``invalid``): what ``schedules list`` and the console show."""
    with _locked(path) as schedules:
        names, entries = list(schedules), list(schedules.values())
    now = Settings.from_env().schedule_now()
    for e in entries:
        # the scheduler starts no tick at or before the last one (``_look``); a rehearsal
        # (``--now`` ahead of the clock) is not the schedule's last tick
        cron = _parsed(e)
        if isinstance(cron, Cron) and e.get("suspended"):
            e["next"] = _stamp(None)  # none starts until it is resumed
        elif isinstance(cron, Cron):
            e["next"] = _stamp(next_tick(cron, max(now, e.get("lastTick") or 0.0)))
        else:
            e["next"], e["invalid"] = _stamp(None), cron
    return names, entries


async def cmd_list(args: argparse.Namespace) -> int:
    names, entries = listed(Path(args.file))
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    if not entries:
        print("no schedules")
        return 0
    rows = [
        ("NAME", "SCHEDULE", "TIME ZONE", "WORKFLOW", "POLICY", "LAST TICK", "NEXT TICK", "NOTE")
    ]
    for name, e in zip(names, entries, strict=True):
        if e.get("invalid") and _misshapen(e):  # its fields cannot be trusted to print
            rows.append((name, "-", "-", "-", "-", "-", "-", f"not scheduled: {e['invalid']}"))
            continue
        rehearsed = (e.get("rehearsal") or {}).get("lastTick")
        note = f"not scheduled: {e['invalid']}" if e.get("invalid") else ""
        if e.get("suspended"):
            note = f"suspended {note}".rstrip()
        if rehearsed:
            note = f"(rehearsed to {_stamp(rehearsed)}) {note}".rstrip()
        rows.append(
            (
                name,
                str(e["cron"]),
                str(e["timeZone"]),
                str(e["workflow"]),
                str(e["concurrencyPolicy"]),
                _stamp(e.get("lastTick")),
                str(e["next"]),
                note,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


async def cmd_run(args: argparse.Namespace) -> int:
    if args.now and not args.once:
        raise UsageError("--now needs --once (a looping scheduler follows the clock)")
    fixed = _instant(args.now) if args.now else None
    failing: dict[str, str] = {}  # schedule -> the kind of world error it last met
    async with opened_world(args.world, create=True) as world:
        client = Client(world)
        while True:
            clock = Settings.from_env().schedule_now()
            now = fixed if fixed is not None else clock
            with _locked(Path(args.file)) as schedules:
                for name, entry in schedules.items():
                    try:
                        said = await _look(client, name, entry, now, rehearsal=now > clock)
                    except WaylineError as err:
                        if args.once:
                            raise
                        _said_failing(failing, name, err)
                        continue
                    if failing.pop(name, None) is not None:
                        print(f"{name}: the world answers again", file=sys.stderr, flush=True)
                    if said:
                        print(said, flush=True)
            if args.once:
                return 0
            stop_if_cancelled()
            await asyncio.sleep(1.0)


def _said_failing(failing: dict[str, str], name: str, err: WaylineError) -> None:
    """A looping scheduler outlives a world it cannot reach (NATS restarting, say): a look
    writes its tick only once its run is started, so the tick is looked at again next second
    and started once. Said once per schedule and kind of error, not every second."""
    kind = type(err).__name__
    if failing.get(name) != kind:
        print(f"{name}: not looked at: {err} (looking again every second)", file=sys.stderr,
              flush=True)  # fmt: skip
    failing[name] = kind


async def _look(
    client: Client, name: str, entry: dict[str, Any], now: float, *, rehearsal: bool = False
) -> str | None:
    """Start the schedule's due tick, if any; what happened, for a person. A ``rehearsal``
    (``--now`` ahead of the clock) writes its record in ``entry["rehearsal"]``, not in the
    schedule's: the scheduler on the clock must still start the ticks before ``now``.

    The file is configuration a person may edit: a cron or time zone that no longer parses
    is said once and the schedule skipped (the others still run), until it is fixed."""
    cron = _parsed(entry)
    if not isinstance(cron, Cron):
        if entry.get("invalid") == cron:
            return None
        entry["invalid"] = cron
        return f"{name}: not scheduled: {cron} (fix it in the schedules file)"
    entry.pop("invalid", None)
    if entry.get("suspended"):
        return None  # its missed ticks are looked at once it is resumed (``due``)
    if rehearsal:
        record = dict(entry.get("rehearsal") or {})
        try:
            return await _look_in(client, entry, record, now)
        finally:
            if record:
                entry["rehearsal"] = record
    # the clock has caught up with a rehearsal: its record says nothing any more
    kept = entry.get("rehearsal") or {}
    if all((kept.get(k) or 0.0) <= now for k in ("lastTick", "missedTick", "skippedTick")):
        entry.pop("rehearsal", None)
    return await _look_in(client, entry, entry, now)


async def _look_in(
    client: Client, entry: dict[str, Any], record: dict[str, Any], now: float
) -> str | None:
    """``_look`` with what it finds written in ``record`` (the entry, or its rehearsal)."""
    cron = parse(entry["cron"], entry["timeZone"])
    real, rehearsed = entry.get("lastTick") or 0.0, record.get("lastTick") or 0.0
    since = max(entry["created"], real, rehearsed)
    deadline = entry.get("startingDeadlineSeconds")
    tick = due(cron, since, now, deadline)
    if tick is None:
        return _missed(entry, record, cron, since, now)
    # the previous run: the latest tick's, the schedule's own or its rehearsal's
    last, live = (record if rehearsed > real else entry).get("lastRun"), False
    if last and entry["concurrencyPolicy"] != "Allow":
        try:
            live = not (await client.get_run(last)).status.terminal
        except RunNotFoundError:
            live = False
        if live and entry["concurrencyPolicy"] == "Forbid":
            # said once: the loop looks every second, and the tick stays due (it runs late
            # if the run ends within the starting deadline)
            if record.get("skippedTick") == tick:
                return None
            record["skippedTick"] = tick
            return f"{entry['name']}: tick {_stamp(tick)} skipped, {last} is still running"
        if live:
            await client.cancel(last, reason=f"replaced by schedule {entry['name']}")
    run_id = tick_run_id(entry, tick)
    stored = entry.get("input")  # JSON text, checked by ``add``
    args = [] if stored is None else as_arguments(parse_json(stored, "--input"))
    try:  # a rehearsal started it, or a scheduler stopped before it recorded the tick
        existed = bool(await client.get_run(run_id))
    except RunNotFoundError:
        existed = False
    # once: a repeat re-sends the start
    await client.start_with(StartOptions(run_id=run_id), entry["workflow"], *args)
    record["lastTick"], record["lastRun"] = tick, run_id
    if existed:
        return f"{entry['name']}: tick {_stamp(tick)} had its run {run_id} already"
    replaced = f" (cancelled {last}, still running)" if live else ""
    return f"{entry['name']}: tick {_stamp(tick)} started {run_id}{replaced}"


def _parsed(entry: dict[str, Any]) -> Cron | str:
    """The schedule's cron, or why it does not parse (the file was edited by hand)."""
    wrong = _misshapen(entry)
    if wrong is not None:
        return wrong
    try:
        return parse(entry["cron"], entry["timeZone"])
    except CronError as err:
        return str(err)


_TEXT = ("name", "cron", "timeZone", "workflow")
_NUMBERS = ("created",)
_OPTIONAL_NUMBERS = ("startingDeadlineSeconds", "lastTick", "missedTick", "skippedTick")
_TIMES = ("created", "lastTick", "missedTick", "skippedTick")


def _misshapen(entry: dict[str, Any]) -> str | None:
    """What is wrong with a schedule's fields, as ``add`` writes them, after an edit by hand
    (a missing field, a number where text belongs); None when nothing is."""

    def number(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    for key in _TEXT:
        if not isinstance(entry.get(key), str):
            return f"{key!r} is {'missing' if key not in entry else 'not a string'}"
    for key in _NUMBERS:
        if not number(entry.get(key)):
            return f"{key!r} is {'missing' if key not in entry else 'not a number'}"
    for key in _OPTIONAL_NUMBERS:
        if entry.get(key) is not None and not number(entry[key]):
            return f"{key!r} is not a number"
    for key in _TIMES:  # an instant off the calendar would end a look in a traceback
        if entry.get(key) is not None and not _on_calendar(entry[key]):
            return f"{key!r} is not a time between the years 1 and 9999"
    if entry.get("concurrencyPolicy") not in POLICIES:
        return f"'concurrencyPolicy' is not one of {', '.join(POLICIES)}"
    for key in ("input", "lastRun"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            return f"{key!r} is not a string"
    rehearsal = entry.get("rehearsal") or {}
    if not isinstance(rehearsal, dict):
        return "'rehearsal' is not an object"
    for key in _TIMES[1:]:
        if rehearsal.get(key) is not None and not (
            number(rehearsal[key]) and _on_calendar(rehearsal[key])
        ):
            return f"'rehearsal' {key!r} is not a time between the years 1 and 9999"
    if entry.get("input") is not None:
        try:
            json.loads(entry["input"])
        except json.JSONDecodeError as err:
            return f"'input' is not JSON ({err.msg} at position {err.pos})"
    return None


def _missed(
    entry: dict[str, Any], record: dict[str, Any], cron: Any, since: float, now: float
) -> str | None:
    """A tick passed over for ``--starting-deadline``, said once (the loop looks every
    second); None when no tick is due at all."""
    tick = last_tick(cron, now)
    if tick is None or tick <= since or record.get("missedTick") == tick:
        return None
    record["missedTick"] = tick
    return (
        f"{entry['name']}: tick {_stamp(tick)} missed: {now - tick:.0f}s late, past its "
        f"starting deadline of {entry['startingDeadlineSeconds']:g}s"
    )


def add_commands(sub: argparse._SubParsersAction, command: object) -> None:  # type: ignore[type-arg]
    make = command  # the parser's own `command(parent, name, help)` helper
    top = make(sub, "schedules", "cron schedules that start runs (no Kubernetes needed)")  # type: ignore[operator]
    top.set_defaults(help_parser=top)
    inner = top.add_subparsers(dest="schedules_command", metavar="COMMAND")
    p = make(inner, "add", "add a schedule")  # type: ignore[operator]
    p.add_argument("name", metavar="NAME")
    p.add_argument("--cron", required=True, metavar="EXPR", help="5 fields, e.g. '*/5 * * * *'")
    p.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA time zone (default UTC)")
    p.add_argument("--workflow", required=True, metavar="NAME")
    p.add_argument(
        "--input",
        metavar="JSON",
        help="as `wayline start --input` (@PATH or @- reads it from a file or standard input; "
        "its text is kept in the schedule)",
    )
    p.add_argument("--concurrency-policy", choices=POLICIES, default="Allow")
    p.add_argument(
        "--starting-deadline",
        type=seconds_arg,
        metavar="SECONDS",
        help="a tick later than this is missed (said once), not started",
    )
    p.set_defaults(handler=cmd_add)
    p = make(inner, "list", "the schedules, with their next tick")  # type: ignore[operator]
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_list)
    for verb, what, handler in (
        ("remove", "remove a schedule (its runs stay)", cmd_remove),
        ("suspend", "start none of a schedule's ticks until it is resumed", cmd_suspend),
        ("resume", "start a suspended schedule's ticks again", cmd_suspend),
    ):
        p = make(inner, verb, what)  # type: ignore[operator]
        p.add_argument("name", metavar="NAME")
        p.set_defaults(handler=handler)
    p = make(inner, "run", "start each schedule's due tick, every second (or --once)")  # type: ignore[operator]
    p.add_argument("--once", action="store_true", help="one look, then exit")
    p.add_argument(
        "--now",
        metavar="ISO-TIME",
        help="look at this time instead (with --once); a time ahead of the clock is a "
        "rehearsal: the runs it starts are real, but it is not recorded as the schedule's "
        "last tick, so the scheduler still starts the ticks before it",
    )
    p.set_defaults(handler=cmd_run)
    for parser in (top, *inner.choices.values()):
        parser.add_argument(
            "--file",
            default=argparse.SUPPRESS if parser is not top else ".wayline/schedules.json",
            metavar="PATH",
            help="where the schedules are kept (default .wayline/schedules.json)",
        )


def _instant(text: str) -> float:
    """``--now``: an ISO 8601 time (UTC unless it names an offset), within the span a schedule
    is looked at (``cron.EARLIEST`` to ``cron.LATEST``)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--now {text!r} is not an ISO 8601 time (e.g. 2026-12-04T09:00:00+00:00)"
        ) from None
    # an aware time's timestamp is a subtraction: it is defined even where its UTC date is not
    at = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    if not _in_span(at):
        raise UsageError(
            f"--now {text!r} is out of range: a schedule is looked at from {_stamp(EARLIEST)} "
            f"to {_stamp(LATEST)} (its next tick is looked for up to 9 years ahead, and the "
            "calendar ends with the year 9999)"
        )
    return at


def _in_span(at: float) -> bool:
    """Whether ``at`` is an instant a schedule is looked at (NaN is not)."""
    return EARLIEST <= at <= LATEST


def _on_calendar(at: float) -> bool:
    """Whether ``at`` (a time in the schedules file, which a person may edit) has a date, so
    it can be shown (``_stamp``); the cron then finds its ticks, or none, without failing."""
    try:
        datetime.fromtimestamp(at, UTC)
    except (OverflowError, ValueError, OSError):
        return False
    return True
