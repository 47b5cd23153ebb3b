"""Fixtures shared by the unit tests: a real embedded world in the test's directory (a module
that needs another world defines its own ``world``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from wayline.worlds.local import LocalWorld


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[LocalWorld]:
    w = LocalWorld(tmp_path / "wayline.db", poll_interval=0.01)
    await w.start()
    try:
        yield w
    finally:
        await w.close()
