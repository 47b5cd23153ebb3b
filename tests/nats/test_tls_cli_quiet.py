"""``wayline runs list`` over TLS, as a user runs it (its own process, so that what the
interpreter prints at exit is seen): it prints the runs and nothing on stderr. It printed an
asyncio SSL warning on every call."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nats.test_tls_and_nkeys import _tls_server, pki  # noqa: F401 - fixture
from tests.nats_fixtures import NatsServer
from wayline import open_world


@pytest.fixture
def tls_server(pki: Path, tmp_path: Path) -> Iterator[NatsServer]:  # noqa: F811
    yield from _tls_server(pki, tmp_path, "ip.pem")


async def test_runs_list_over_tls_says_nothing_on_stderr(
    pki: Path,  # noqa: F811
    tls_server: NatsServer,
) -> None:
    url = f"tls://127.0.0.1:{tls_server.port}?prefix=quiet&tls_ca={pki / 'ca.pem'}"
    world = open_world(url)
    await world.start()  # the world's streams, as a worker makes them
    await world.close()
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "wayline", "runs", "list", "--world", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
