"""How the CLI opens a server world: its URL's password never reaches a log line or an error
it prints, and a world not created yet is waited for when the command was told to wait."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from tests.servers import free_port
from wayline import open_world
from wayline.cli import commands
from wayline.errors import WorldNotCreatedError, WorldUnavailableError


async def test_an_unreachable_world_is_named_without_its_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"nats://worker:s3cret-pw@127.0.0.1:{free_port()}?connect_timeout=0.2&connect_attempts=1"
    caplog.set_level(logging.WARNING)
    with pytest.raises(WorldUnavailableError) as raised:
        async with commands.opened_world(url, create=True, wait_seconds=3.0):
            pass
    retries = [r.getMessage() for r in caplog.records if "not reachable yet" in r.getMessage()]
    assert retries, "the retry was not logged"
    assert all("s3cret-pw" not in line and "127.0.0.1" in line for line in retries), retries
    assert "s3cret-pw" not in str(raised.value)


async def test_a_world_not_created_yet_is_waited_for_when_asked_to_wait(
    nats_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A console pod may start before the workers that create the world's streams: told to
    wait, it waits for them (as for a server not up yet) instead of exiting."""
    url = f"{nats_server.url}?prefix=notyet{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorldNotCreatedError):  # not told to wait: refused at once, as before
        async with commands.opened_world(url, create=False):
            pass
    caplog.set_level(logging.WARNING)

    async def create_later() -> None:
        await asyncio.sleep(1.0)
        async with open_world(url):  # a worker starting: it creates the streams
            pass

    creating = asyncio.create_task(create_later())
    async with commands.opened_world(url, create=False, wait_seconds=30.0) as world:
        assert await world.list_runs() == []
    await creating
    assert any("not created yet" in r.getMessage() for r in caplog.records)
