"""``wayline recover``, ``wayline cleanup``, ``wayline archive`` and ``wayline queue
drain-lanes``."""

from __future__ import annotations

import argparse
import json
import sys

from .._core.events import RunStatus
from ..durations import to_seconds
from ..worker import Worker
from ..world.ports import Retention
from .commands import import_apps, opened_world, run_client
from .loading import UsageError, UsageParser, add_run_argument


def duration_arg(text: str) -> float:
    try:
        return to_seconds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


async def cmd_recover(args: argparse.Namespace) -> int:
    """Re-arm every non-terminal run that has no wake coming, now (workers also do this when
    they start)."""
    # a module with no workflow is refused there: no filter would be every run
    workflows = import_apps(args.app or [])
    async with opened_world(args.world, create=False) as world:
        counts = await Worker(world, workflows, recover=False).recover_runs()
    print(json.dumps(counts))
    return 0


async def cmd_cleanup(args: argparse.Namespace) -> int:
    statuses = [RunStatus(s) for s in args.status] if args.status else None
    async with opened_world(args.world, create=False) as world:
        deleted = await world.delete_runs(older_than=args.older_than, statuses=statuses)
        try:  # payloads sent before a wait that never came: NATS keeps them until swept
            swept = await world.hook_buffer().sweep()
        except NotImplementedError:  # a world without the store
            swept = 0
    print(f"deleted {deleted} run{'s' if deleted != 1 else ''}")
    if swept:
        print(f"swept {swept} expired hook payload{'s' if swept != 1 else ''}")
    return 0


async def cmd_archive(args: argparse.Namespace) -> int:
    if args.count and args.older_than is not None:
        raise UsageError(
            "--count prints how many runs the archive holds and archives nothing: give it "
            "alone, or --older-than alone"
        )
    async with opened_world(args.world, create=False) as world:
        if args.count:
            print(await world.archived_count())
            return 0
        if args.older_than is None:
            raise UsageError("archive needs --older-than DURATION (or --count)")
        moved, total = await archive_all(world, args.older_than)
    print(f"archived {moved} run{'s' if moved != 1 else ''} ({total} in the archive)")
    return 0


async def archive_all(retention: Retention, older_than: float) -> tuple[int, int]:
    """Archive every run that ended ``older_than`` seconds ago or more: how many were moved,
    and how many the archive holds now."""
    moved = 0
    while True:  # each call is one transaction of at most 1000 runs
        batch = await retention.archive_runs(older_than=older_than, limit=1000)
        moved += batch
        if batch == 0:
            break
    return moved, await retention.archived_count()


async def cmd_runs_repair(args: argparse.Namespace) -> int:
    """Remove the entry a CORRUPT_LOG error named, check the log reads again and wake the run.
    Refuses (exit 2, nothing changed) to remove any entry but the one the log first fails at."""
    async with opened_world(args.world, create=False) as world:
        done = await (await run_client(world, args)).repair_run(args.run_id, args.drop_seq)
    print(f"repaired {args.run_id}: " + "; ".join(done))
    return 0


async def cmd_queue_drain_lanes(args: argparse.Namespace) -> int:
    """Move queued work to the one subject a release before the priority levels reads, before
    rolling back to it (docs/nats.md, "Rolling back"). Exit 0 once it has done its pass, also
    when it left messages (held by a worker, or delayed; the printed counts and a line each on
    stderr say so): run it again once they are not."""
    async with opened_world(args.world, create=False) as world:
        done = await world.drain_lanes(held_too=args.held_too)
    print(json.dumps({"moved": done.moved, "held": done.held, "delayed": done.delayed}))
    if done.held:
        print(
            f"left {done.held} message{'s' if done.held != 1 else ''} delivered and not acked: "
            "stop the workers that may hold them, then run again with --held-too",
            file=sys.stderr,
        )
    if done.delayed:
        print(
            f"left {done.delayed} delayed message{'s' if done.delayed != 1 else ''} that will "
            "fire onto a level or lane: run again once they are due",
            file=sys.stderr,
        )
    return 0


def add_repair(runs_sub: argparse._SubParsersAction, command: object) -> None:  # type: ignore[type-arg]
    p = command(  # type: ignore[operator]
        runs_sub,
        "repair",
        "remove the unreadable log entry of a corrupt run (CORRUPT_LOG names it) and resume it",
    )
    add_run_argument(p)
    p.add_argument(
        "--drop-seq",
        type=int,
        metavar="N",
        help="the entry to remove (the number the CORRUPT_LOG error names); without it, "
        "only check the log and rebuild the run's view from it",
    )
    p.set_defaults(handler=cmd_runs_repair)


def add_commands(sub: argparse._SubParsersAction, command: object) -> None:  # type: ignore[type-arg]
    make = command  # the parser's own `command(parent, name, help)` helper
    p = make(sub, "recover", "re-arm every non-terminal run; prints {running, waiting, ...}")  # type: ignore[operator]
    p.add_argument(
        "--app",
        action="append",
        metavar="MODULE",
        help="only runs of the workflows in MODULE (repeatable)",
    )
    p.set_defaults(handler=cmd_recover)
    p = make(sub, "cleanup", "delete terminal runs older than a duration")  # type: ignore[operator]
    p.add_argument(
        "--older-than",
        type=duration_arg,
        required=True,
        metavar="DURATION",
        help="e.g. 7d, 12h, 0 (0 takes every terminal run)",
    )
    p.add_argument("--status", action="append", choices=[s.value for s in RunStatus if s.terminal])
    p.set_defaults(handler=cmd_cleanup)
    p = make(sub, "archive", "move terminal runs older than a duration to the archive")  # type: ignore[operator]
    p.add_argument("--older-than", type=duration_arg, metavar="DURATION")
    p.add_argument(
        "--count",
        action="store_true",
        help="print how many runs the archive holds, and archive nothing",
    )
    p.set_defaults(handler=cmd_archive)
    queue = make(sub, "queue", "maintain the queue (before a rollback)")  # type: ignore[operator]
    queue.set_defaults(help_parser=queue)
    queue_sub = queue.add_subparsers(
        dest="queue_command", metavar="COMMAND", parser_class=UsageParser
    )
    p = make(  # type: ignore[operator]
        queue_sub,
        "drain-lanes",
        "move work of a priority or a fairness key to the subject a release before the "
        "priority levels reads; prints {moved, held, delayed}",
    )
    # no abbreviation: ``--held`` (``held`` as in the printed counts) must not pass for the
    # flag that moves work from under running workers
    p.allow_abbrev = False
    p.add_argument(
        "--held-too",
        action="store_true",
        help="also move messages delivered and not acked (only once every worker that may "
        "hold them is stopped: a moved message is delivered again)",
    )
    p.set_defaults(handler=cmd_queue_drain_lanes)
