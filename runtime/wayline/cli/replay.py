"""``wayline runs export`` and ``wayline replay``: check a code change against recorded runs
before it is deployed (see ``_core.histories``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._core.events import RunStatus
from .._core.histories import OK, History, ReplayResult, check, history_of, parse_history
from ..client import Client
from .commands import opened_world, run_client
from .loading import UsageError, import_app, namespace_arg, run_arg, workflows_in


async def cmd_runs_export(args: argparse.Namespace) -> int:
    """Print each named run's history as one JSON line; without names, the newest runs (of
    ``--status`` and ``--workflow``, up to ``--limit``). Exit 1 when there was none to print."""
    printed = 0
    async with opened_world(args.world, create=False) as world:
        if args.run_id:
            names = list(args.run_id)
        else:
            client = Client(world, namespace=args.namespace)
            found = await client.list_runs(status=args.status, limit=args.limit)
            names = [r.run_id for r in found if args.workflow in (None, r.workflow)]
        for name in names:
            one = argparse.Namespace(run_id=name, world=args.world, namespace=args.namespace)
            await run_client(world, one)  # a business id names its newest run
            history = history_of(one.run_id, await world.list_events(one.run_id))
            print(json.dumps(history.to_json(), default=str), flush=True)
            printed += 1
    if not printed:
        print("error: no run to export (see: wayline runs list)", file=sys.stderr)
        return 1
    return 0


def read_histories(paths: list[str]) -> Iterator[History]:
    """Every history in ``paths`` (``-`` is standard input), in order; a bad line is a
    :class:`UsageError` naming its file and line."""
    for path in paths:
        if path == "-":
            lines = sys.stdin.read().splitlines()
        else:
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as err:
                raise UsageError(f"cannot read {path}: {err}") from None
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    yield parse_history(line, f"{path}:{number}")
                except ValueError as err:
                    raise UsageError(str(err)) from None


async def cmd_replay(args: argparse.Namespace) -> int:
    """Replay histories against the workflows of ``--app``; exit 1 when any would not go on
    under this code, 0 when every one would."""
    workflows: list[Any] = []
    for spec in args.app:
        workflows.extend(workflows_in(import_app(spec)))
    results: list[ReplayResult] = [check(h, workflows) for h in read_histories(args.histories)]
    if not results:
        print("error: no history to replay in " + ", ".join(args.histories), file=sys.stderr)
        return 1
    for r in results:
        print(str(r))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    print(f"replayed {len(results)} histor{'y' if len(results) == 1 else 'ies'}: {summary}")
    return 0 if all(r.verdict == OK for r in results) else 1


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    runs_sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    command: Any,
) -> None:
    p = command(
        runs_sub,
        "export",
        "print runs' histories, one JSON line each, for `wayline replay` (no RUN_ID: the "
        "newest runs, filtered by --status and --workflow)",
    )
    p.add_argument(
        "run_id", nargs="*", metavar="RUN_ID", type=run_arg, help="run ids or business ids"
    )
    p.add_argument("--namespace", type=namespace_arg, metavar="NAME")
    p.add_argument("--status", choices=[s.value for s in RunStatus])
    p.add_argument("--workflow", metavar="NAME")
    p.add_argument("--limit", type=int, default=100, metavar="N")
    p.set_defaults(handler=cmd_runs_export)
    p = command(
        sub,
        "replay",
        "replay exported histories against the workflows of --app, with no world: exit 1 "
        "when a worker of this code would block a run on a divergence or never receive it",
    )
    p.add_argument("--app", action="append", required=True, metavar="MODULE", help="repeatable")
    p.add_argument("histories", nargs="+", metavar="FILE", help="JSON lines; - for stdin")
    p.set_defaults(handler=cmd_replay)
