"""The operator's loops end when it stops, also when one loses its cancel: a cancel that lands
just as the awaited call completes is lost (``asyncio.wait_for`` before Python 3.12, which the
NATS client and the status pump use). Each loop ends on a stop flag as well, so a close that
waits for it returns and nothing keeps running. On a SQLite file and on a real nats-server."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.lost_cancels import losing_its_cancel
from wayline.world import World
from wayline_operator import handlers
from wayline_operator.mirror import Cadence, Mirror
from wayline_operator.notices import Budget, Notice
from wayline_operator.reconcile import Reconciler


@pytest.fixture(params=["local", "nats"])
def world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return f"sqlite:///{tmp_path / 'wayline.db'}"
    server = request.getfixturevalue("nats_server")
    return f"{server.url}?prefix=t{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def world(world_url: str) -> AsyncIterator[World]:
    w = wayline.open_world(world_url)
    await w.start()
    try:
        yield w
    finally:
        await w.close()


def _post(body: Mapping[str, Any], batch: Sequence[Notice]) -> None:
    pass


async def _patch(namespace: str, name: str, status: Mapping[str, Any]) -> bool:
    return True


async def _remove(ref: Mapping[str, Any]) -> None:
    pass


async def _returns_soon(aw: Any, what: str) -> None:
    """``aw`` returns within a bound. Not ``asyncio.wait_for``: a close that suppresses the
    ``CancelledError`` of the task it awaits swallows its own cancel too, so a timed-out
    ``wait_for`` would see it return."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:
        task.cancel()  # cancels what it waits for, once more
        await asyncio.wait({task})
        raise AssertionError(f"{what} waited for a loop that lost its cancel")
    task.result()


async def test_the_mirror_closes_when_its_status_pump_loses_its_cancel(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = Mirror(Reconciler(world), Budget(), _post, _patch, _remove, Cadence(settle=0.0))
    await mirror.follow()
    in_call = asyncio.Event()
    monkeypatch.setattr(mirror.pump, "_idle", losing_its_cancel(mirror.pump._idle, in_call))
    mirror.start()
    tasks = list(mirror._tasks)
    await asyncio.wait_for(in_call.wait(), 10)
    await _returns_soon(mirror.close(), "the mirror's close")
    assert all(t.done() for t in tasks)


async def test_the_mirror_closes_when_its_registry_read_loses_its_cancel(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    cadence = Cadence(settle=0.0, registry=0.01)
    mirror = Mirror(Reconciler(world), Budget(), _post, _patch, _remove, cadence)
    await mirror.follow()
    in_call = asyncio.Event()
    monkeypatch.setattr(world, "list_served", losing_its_cancel(world.list_served, in_call))
    mirror.start()
    tasks = list(mirror._tasks)
    await asyncio.wait_for(in_call.wait(), 10)
    await _returns_soon(mirror.close(), "the mirror's close")
    assert all(t.done() for t in tasks)


async def test_the_operator_cleans_up_when_its_sweep_loses_its_cancel(
    world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_call = asyncio.Event()
    recover = wayline.Worker.recover_runs
    monkeypatch.setattr(wayline.Worker, "recover_runs", losing_its_cancel(recover, in_call))
    monkeypatch.setattr(
        handlers, "SETTINGS", dataclasses.replace(handlers.SETTINGS, world_url=world_url)
    )
    monkeypatch.setattr(handlers, "SWEEP_SECONDS", 60.0)  # it sweeps first, then waits
    memo: dict[str, Any] = {}
    await handlers.startup(settings=handlers.kopf.OperatorSettings(), memo=memo)
    await asyncio.wait_for(in_call.wait(), 10)
    await _returns_soon(handlers.cleanup(memo=memo), "the operator's cleanup")
    assert memo["sweeper"].done()
