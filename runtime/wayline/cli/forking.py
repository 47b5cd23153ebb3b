"""``wayline runs fork`` and ``wayline runs redrive``: day-2 commands that run a run's steps
again (``Client.fork``, ``Client.redrive``; docs/day2.md, "Fork and redrive"). Exit codes as
docs/cli.md: 2 when the fork or a redrive is refused (the step or occurrence is not in the
run, the run has not failed, no live worker serves it), naming why on stderr; 1 when a bulk
redrive matches no failed run."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import Any

from .._core.events import RunStatus
from ..client import Client
from ..errors import WaylineError
from . import pausing
from .commands import opened_world, run_client
from .loading import UsageError, namespace_arg, run_arg


async def cmd_runs_fork(args: argparse.Namespace) -> int:
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        handle = await client.fork(args.run_id, from_step=args.from_step, id=args.id)
        link = (await client.get_run(handle.run_id)).attributes["forkedFrom"]
    named = f" (id {args.id})" if args.id else ""
    print(
        f"forked {args.run_id} from step {link['step']}#{link['occurrence']} "
        f"({link['stepId']}) as {handle.run_id}{named}: the steps before it are reused, it "
        "and the ones after run again"
    )
    return 0


def who_asked(args: argparse.Namespace) -> str:
    """``--by``, else the user this process runs as (what the log records as who asked)."""
    if args.by:
        return str(args.by)
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "cli"


async def cmd_runs_redrive(args: argparse.Namespace) -> int:
    bulk = bool(args.where or args.workflow or args.since is not None or args.status)
    if bulk and args.run_ids:
        raise UsageError("give RUN_IDs or --where/--workflow/--since, not both")
    if not bulk and not args.run_ids:
        raise UsageError("give a RUN_ID, or --where/--workflow/--since for every failed run")
    if args.status not in (None, str(RunStatus.FAILED)):
        raise UsageError(f"only failed runs are redriven, not {args.status}")
    by = who_asked(args)
    refused = done = 0
    async with opened_world(args.world, create=False) as world:
        client = Client(world, namespace=args.namespace)
        if bulk:
            since = None if args.since is None else world.now() - args.since
            found = await world.list_runs(
                status=RunStatus.FAILED,
                workflow=args.workflow,
                limit=args.limit,
                where=args.where,
                since=since,
            )
            ids = [info.run_id for info in found]
        else:
            ids = [await client.resolve(run_id) for run_id in args.run_ids]
        for run_id in ids:
            try:
                redrive = await client.redrive(run_id, args.reason, by=by, dry_run=args.dry_run)
            except WaylineError as err:
                print(f"error: {err.message}", file=sys.stderr)
                refused += 1
                continue
            done += 1
            verb = "would redrive" if args.dry_run else "redriven"
            print(
                f"{verb} {run_id} ({redrive.workflow}) from step {redrive.step} ({redrive.step_id})"
            )
    if bulk and not ids:
        print("error: no failed run matches", file=sys.stderr)
        return 1
    if bulk or len(ids) > 1:
        print(
            f"{'would redrive' if args.dry_run else 'redriven'} {done} of {len(ids)} runs, "
            f"by {by}" + (f"; {refused} refused" if refused else "")
        )
    return 2 if refused else 0


def add_commands(
    runs_sub: Any,
    command: Callable[..., argparse.ArgumentParser],
    where_arg: Callable[[str], Any],
    duration_arg: Callable[[str], float],
) -> None:
    """``runs fork`` and ``runs redrive`` on the ``runs`` subcommands."""
    p = command(
        runs_sub,
        "fork",
        "start a new run from a run's log up to a step: the steps before it are reused, it "
        "and the later ones run again with the code the workers run now",
    )
    p.add_argument("run_id", metavar="RUN_ID", type=run_arg, help="the run to fork")
    p.add_argument(
        "--from-step",
        required=True,
        metavar="NAME[#N]",
        help="the step to run again, and everything after it: the Nth call of NAME "
        "(counted from 1; default 1)",
    )
    p.add_argument("--id", metavar="ID", help="the new run's business id (else a fresh run id)")
    p.add_argument("--namespace", type=namespace_arg, metavar="NAME", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_runs_fork)
    p = command(
        runs_sub,
        "redrive",
        "run failed runs again from their failed step, in place, with a fresh retry budget",
    )
    p.add_argument("run_ids", metavar="RUN_ID", nargs="*", type=run_arg, help="failed runs")
    p.add_argument("--reason", default="redriven from the CLI", help="recorded in the run's log")
    p.add_argument("--by", metavar="WHO", help="who asked, for the log (default: the OS user)")
    pausing.add_bulk(p, where_arg, "failed")
    p.add_argument("--status", metavar="failed", help="failed: the only status redriven")
    p.add_argument("--workflow", metavar="NAME", help="every failed run of workflow NAME")
    p.add_argument(
        "--since", type=duration_arg, metavar="DURATION", help="failed runs created lately"
    )
    p.add_argument("--namespace", type=namespace_arg, metavar="NAME", help=argparse.SUPPRESS)
    p.set_defaults(handler=cmd_runs_redrive)
