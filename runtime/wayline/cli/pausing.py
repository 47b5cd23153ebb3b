"""``wayline runs pause`` and ``wayline runs unpause``: a person holds a run, and lets it go
on, with the reason recorded in its log (``Client.pause``, ``Client.unpause``). Exit codes as
docs/cli.md: 1 when there is nothing to do (the run has ended, is paused already, or is not
paused), 2 when the run cannot be paused (it is blocked, compensating or being cancelled)."""

from __future__ import annotations

import argparse
import sys

from ..client import Client
from ..errors import RunTerminalError
from ..world import RunInfo
from .commands import _get_run, opened_world, run_client


async def cmd_runs_pause(args: argparse.Namespace) -> int:
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
