"""The console's app over the parametrised world, called in-process (httpx's ASGI transport on
the test's own event loop, where the world's connections live)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.runtime.harness import Engine
from wayline.cli.console import create_app

TOKEN = "console-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Console:
    engine: Engine
    http: httpx.AsyncClient


@pytest.fixture
async def console(engine: Engine) -> AsyncIterator[Console]:
    app = create_app(engine.client, world_url="test://world", token=TOKEN, poll_seconds=0.05)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield Console(engine, http)
