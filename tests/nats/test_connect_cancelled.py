"""A stop while the NATS world is connecting (a worker waiting for its server, SIGTERMed)
leaves nothing behind that asyncio reports: seen at load 10-24 as a traceback in
``wayline worker``'s output ("Task exception was never retrieved", NoServersError) in
tests/cli/test_supervisor.py.

nats-py can swallow the cancel (Python 3.11's ``asyncio.wait_for`` around its socket connect
returns what the connect gave when the cancel comes at the same moment) and end the attempt
with NoServersError instead. That moment cannot be hit on purpose against a real server, so
the client's ``connect`` is replaced by one that does what nats-py then does."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from tests.nats_fixtures import free_port
from wayline.worlds.nats import NatsWorld


async def test_a_stop_that_nats_py_swallows_while_connecting_is_not_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nats.aio.client import Client

    from nats import errors

    entered = asyncio.Event()

    async def connect(self: Client, *args: Any, **kwargs: Any) -> None:
        entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:  # swallowed: the attempt goes on and fails
            await asyncio.sleep(0)
            raise errors.NoServersError from None

    monkeypatch.setattr(Client, "connect", connect)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        world = NatsWorld(f"nats://127.0.0.1:{free_port()}", connect_attempts=1)
        starting = asyncio.ensure_future(world.start())
        await asyncio.wait_for(entered.wait(), 10)
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        await world.close()
        del starting
        for _ in range(3):  # the attempt's task is reported when it is collected
            await asyncio.sleep(0)
            gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []
