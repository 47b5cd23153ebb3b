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
from wayline.cli import commands

pytestmark = pytest.mark.timeout(90)


def _losing_its_cancel(call: Any, in_call: asyncio.Event) -> Any:
    """``call``, except that its first call after ``in_call`` is armed swallows the cancel
    that comes while it runs (as a call that completed just as the cancel came)."""
    swallowed: list[bool] = []

    async def losing(*args: Any, **kwargs: Any) -> Any:
        if not swallowed:
            swallowed.append(True)
            in_call.set()
            try:
                await asyncio.sleep(5.0)
            except asyncio.CancelledError:
                pass  # the call completed as the cancel came: the cancel is gone
        return await call(*args, **kwargs)

    return losing


async def _stops_on_its_cancel(task: asyncio.Task[Any], in_call: asyncio.Event) -> None:
    await asyncio.wait_for(in_call.wait(), 30)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:
        task.cancel()  # a second Ctrl-C
        await asyncio.wait({task})
    assert done, "the command carried on after its cancel"
    assert task.cancelled()


async def test_runs_watch_stops_when_a_read_loses_its_cancel(
    cli: Cli, world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with wayline.open_world(world_url) as world:
        handle = await wayline.Client(world).start("add", 1, 2)  # no worker: it stays pending
    in_call = asyncio.Event()
    kind = type(wayline.open_world(world_url))
    monkeypatch.setattr(kind, "list_events", _losing_its_cancel(kind.list_events, in_call))
    args = argparse.Namespace(world=world_url, run_id=handle.run_id, poll=0.05)
    task = asyncio.ensure_future(commands.cmd_runs_watch(args))
    await _stops_on_its_cancel(task, in_call)


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
    monkeypatch.setattr(NatsWorld, "start", _losing_its_cancel(unreachable, in_call))

    async def opening() -> None:
        async with commands.opened_world(nats_server.url, create=True, wait_seconds=300.0):
            raise AssertionError("the world was not reachable")

    await _stops_on_its_cancel(asyncio.ensure_future(opening()), in_call)
