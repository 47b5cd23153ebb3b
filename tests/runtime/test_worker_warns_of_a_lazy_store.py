"""A starting worker logs one warning line when the store it writes to acknowledges writes
before they are on disk: a SQLite world with ``?sync=normal``, and a nats-server whose
monitoring endpoint (``WAYLINE_NATS_MONITOR``) shows the default ``sync_interval``. Real
servers started with each setting; a check that cannot be made is logged and the worker
starts all the same."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import wayline
from tests.nats_fixtures import NatsServer, monitored_server
from tests.runtime import flows
from tests.runtime.harness import settings
from tests.servers import free_port
from wayline.worlds.local import LocalWorld
from wayline.worlds.nats import NatsWorld

LAZY = "acknowledges writes before they are on disk"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "wayline.worker" and r.levelno == logging.WARNING
    ]


async def _start(world: wayline.World, monitors: tuple[str, ...] = ()) -> None:
    given = settings(nats_monitors=monitors) if monitors else settings()
    worker = wayline.Worker(world, [flows.chain], settings=given)
    try:
        async with worker:
            assert worker.consuming()
    finally:  # the worker started the world it was given; closing it is the test's
        await world.close()


@pytest.mark.parametrize("sync", ["normal", "full"])
async def test_a_sqlite_world_without_fsync_is_one_warning_line(
    sync: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wayline.worker")
    await _start(LocalWorld.from_url(f"sqlite:///{tmp_path}/w.db?sync={sync}"))
    lazy = [w for w in _warnings(caplog) if LAZY in w]
    if sync == "normal":
        assert len(lazy) == 1 and "\n" not in lazy[0] and "sync=normal" in lazy[0], lazy
    else:
        assert lazy == [], lazy


@pytest.mark.parametrize("interval", [None, "always"])
async def test_a_nats_server_with_the_default_interval_is_one_warning_line(
    interval: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wayline.worker")
    with monitored_server(interval) as (server, monitor):
        await _start(NatsWorld.from_url(f"{server.url}?prefix=lazy"), (monitor,))
        lazy = [w for w in _warnings(caplog) if LAZY in w]
        if interval is None:
            assert len(lazy) == 1 and "sync_interval 2m" in lazy[0], lazy
            assert "\n" not in lazy[0] and monitor in lazy[0], lazy
        else:
            assert lazy == [], lazy
        # without a monitoring URL the worker cannot tell, and says nothing
        caplog.clear()
        await _start(NatsWorld.from_url(f"{server.url}?prefix=lazy"))
        assert _warnings(caplog) == []


async def test_a_monitor_that_does_not_answer_is_logged_and_the_worker_starts(
    nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wayline.worker")
    silent = f"http://127.0.0.1:{free_port()}"
    await _start(NatsWorld.from_url(f"{nats_server.url}?prefix=silent"), (silent,))
    [line] = _warnings(caplog)
    assert line.startswith("cannot check the store's sync setting") and silent in line, line
