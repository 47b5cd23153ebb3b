"""``wayline runs pause`` and ``wayline runs unpause``: a person holds a run, and lets it go
on, with the reason recorded in its log (``Client.pause``, ``Client.unpause``). Exit codes as
docs/cli.md: 1 when there is nothing to do (the run has ended, is paused already, or is not
paused), 2 when the run cannot be paused (it is blocked, compensating or being cancelled)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .._core.events import RunStatus
from ..client import Client
from ..errors import RunTerminalError, WaylineError
from ..world import RunInfo
from .commands import _get_run, opened_world, run_client
from .loading import UsageError


async def cmd_runs_pause(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return await _bulk(args, "pause", (RunStatus.PENDING, RunStatus.RUNNING))
    recorded, info = await _command(args, "pause")
    if info.status.terminal:
        return _ended(args.run_id, info, "pause")
    if not recorded:
        print(f"error: run {args.run_id} is already paused; nothing to pause", file=sys.stderr)
        return 1
    print(
        f"paused {args.run_id}: it starts nothing new until `wayline runs unpause "
        f"{args.run_id}` (a step already running finishes)"
    )
    return 0


async def cmd_runs_unpause(args: argparse.Namespace) -> int:
    if _bulk_asked(args):
        return await _bulk(args, "unpause", (RunStatus.PAUSED,))
    recorded, info = await _command(args, "unpause")
    if info.status.terminal:
        return _ended(args.run_id, info, "unpause")
    if not recorded:
        print(
            f"error: run {args.run_id} is not paused ({info.status}); nothing to unpause",
            file=sys.stderr,
        )
        return 1
    print(f"unpaused {args.run_id} (now {info.status}); a worker goes on with it")
    return 0


async def _command(args: argparse.Namespace, verb: str) -> tuple[bool, RunInfo]:
    """Whether ``verb`` was recorded, and the run after it."""
    async with opened_world(args.world, create=False) as world:
        client: Client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        act = client.pause if verb == "pause" else client.unpause
        try:
            recorded = await act(args.run_id, args.reason)
        except RunTerminalError:
            recorded = False
        info = await client.get_run(args.run_id)
    return recorded, info


def _ended(run_id: str, info: RunInfo, verb: str) -> int:
    print(f"error: run {run_id} already ended ({info.status}); nothing to {verb}", file=sys.stderr)
    return 1


def add_bulk(p: argparse.ArgumentParser, where_arg: Callable[[str], Any], which: str) -> None:
    """``--where`` (and ``--limit``, ``--dry-run``): the verb for every run of ``which``
    statuses whose search attributes match, instead of one RUN_ID."""
    p.add_argument(
        "--where",
        type=where_arg,
        action="append",
        default=[],
        metavar="EXPR",
        help=f"every {which} run whose search attributes satisfy EXPR (repeatable, all must "
        "hold), instead of one RUN_ID",
    )
    p.add_argument("--limit", type=int, default=1000, metavar="N", help="with --where: at most N")
    p.add_argument("--dry-run", action="store_true", help="with --where: name them, change none")


def _bulk_asked(args: argparse.Namespace) -> bool:
    if args.where and args.run_id is not None:
        raise UsageError("give a RUN_ID or --where, not both")
    if not args.where and args.run_id is None:
        raise UsageError("give a RUN_ID, or --where EXPR for every run that matches")
    if not args.where and args.dry_run:
        raise UsageError("--dry-run goes with --where")
    return bool(args.where)


async def _bulk(args: argparse.Namespace, verb: str, statuses: tuple[RunStatus, ...]) -> int:
    """The verb for each matching run, one line each; a run the verb refuses (it moved on
    meanwhile) is named on stderr and the others go on. Exit 1 when none matched."""
    done = 0
    async with opened_world(args.world, create=False) as world:
        client = Client(world, namespace=args.namespace)
        found: list[RunInfo] = []
        for status in statuses:
            found += await client.list_runs(status=status, where=args.where, limit=args.limit)
        act = client.pause if verb == "pause" else client.unpause
        for info in found[: args.limit]:
            if args.dry_run:
                print(f"would {verb} {info.run_id} ({info.workflow}, {info.status})")
                done += 1
                continue
            try:
                if await act(info.run_id, args.reason):
                    print(f"{verb}d {info.run_id} ({info.workflow})")
                    done += 1
            except WaylineError as err:
                print(f"error: run {info.run_id}: {err.message}", file=sys.stderr)
    if not found:
        said = " and ".join(f"--where {w.source}" for w in args.where)
        print(f"error: no run to {verb} matches {said}", file=sys.stderr)
        return 1
    print(f"{'would ' + verb if args.dry_run else verb + 'd'} {done} of {len(found)} runs")
    return 0
