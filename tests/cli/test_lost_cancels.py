"""Commands that only a cancel ends (Ctrl-C: ``asyncio.run`` cancels the command) stop also
when a world call swallowed that cancel: one that lands just as the call completes is lost
(``asyncio.wait_for`` before Python 3.12, which the NATS client uses). In process, on a SQLite
file and on a real nats-server."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

import wayline
from tests.cli.conftest import Cli
from tests.lost_cancels import ends_on_its_cancel, losing_its_cancel
from wayline.cli import commands

pytestmark = pytest.mark.timeout(90)


async def test_runs_watch_stops_when_a_read_loses_its_cancel(
    cli: Cli, world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with wayline.open_world(world_url) as world:
        handle = await wayline.Client(world).start("add", 1, 2)  # no worker: it stays pending
    in_call = asyncio.Event()
    kind = type(wayline.open_world(world_url))
    monkeypatch.setattr(kind, "list_events", losing_its_cancel(kind.list_events, in_call))
    args = argparse.Namespace(world=world_url, run_id=handle.run_id, poll=0.05)
    task = asyncio.ensure_future(commands.cmd_runs_watch(args))
    await ends_on_its_cancel(task, in_call, "the command carried on after its cancel")


async def test_a_worker_waiting_for_its_world_stops_when_a_connect_loses_its_cancel(
    nats_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker waits up to five minutes for a server world that is not reachable yet; a stop
    cancels that wait (``_unless_stopped``). A connect attempt that swallowed the cancel and
    then failed left it trying again until the five minutes were over. (A SQLite world is
    opened once, never waited for.)"""
    from wayline.errors import WorldUnavailableError
    from wayline.worlds.nats import NatsWorld

    async def unreachable(self: NatsWorld) -> None:
        raise WorldUnavailableError(f"cannot connect to NATS at {nats_server.url}")

    in_call = asyncio.Event()
    monkeypatch.setattr(NatsWorld, "start", losing_its_cancel(unreachable, in_call))

    async def opening() -> None:
        async with commands.opened_world(nats_server.url, create=True, wait_seconds=300.0):
            raise AssertionError("the world was not reachable")

    await ends_on_its_cancel(
        asyncio.ensure_future(opening()), in_call, "the command carried on after its cancel"
    )
