"""A NATS world URL's password never reaches a log line or an error the CLI prints."""

from __future__ import annotations

import logging

import pytest

from tests.servers import free_port
from wayline.cli import commands
from wayline.errors import WorldUnavailableError


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
