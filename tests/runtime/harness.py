"""A running engine for tests: a world of the parametrised kind, a client and workers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import wayline
from wayline._core.definitions import WorkflowDefinition
from wayline._core.events import Event, EventType
from wayline.settings import Settings
from wayline.world import World

SWITCHES = ("WAYLINE_REPLAY_CACHE_RUNS",)
"""Variables of the test process that the tests' settings take: ``make replay-cache-off`` runs
a set of these tests with every wake replayed from the log's first event."""


HELD_DELAY_SECONDS = 0.2
"""The tests' ``held_delay_seconds``: a delivery handed back over a pause comes back this soon
the first time, instead of the 2 s a worker waits by default, which about 30 s of these tests
spent waiting. A quarter of the pause's age takes over after 0.8 s, as with the default."""


def settings(**overrides: Any) -> Settings:
    base = Settings.from_env({k: os.environ[k] for k in SWITCHES if k in os.environ})
    values = {f: getattr(base, f) for f in base.__dataclass_fields__}
    values["held_delay_seconds"] = HELD_DELAY_SECONDS
    values.update(overrides)
    return Settings(**values)


@dataclass
class Engine:
    world: World
    make_world: Any
    client: wayline.Client
    workers: list[wayline.Worker] = field(default_factory=list)

    @asynccontextmanager
    async def worker(
        self, workflows: Iterable[WorkflowDefinition], *, world: World | None = None, **kw: Any
    ) -> AsyncIterator[wayline.Worker]:
        kw.setdefault("settings", settings())
        worker = wayline.Worker(world or self.world, list(workflows), **kw)
        async with worker:
            yield worker


async def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


async def holds_nothing(worker: wayline.Worker, timeout: float = 30.0) -> None:
    """Wait until ``worker`` holds no delivery: the one that suspended a run has ended (and
    given back its replay). A check after it that something did not happen is then made once
    the delivery that could have done it is over, not after a fixed sleep."""

    async def idle() -> bool:
        return not worker._handlers

    await wait_for(idle, timeout=timeout)


def file_exists(path: str) -> Any:
    """A ``wait_for`` predicate: the marker file at ``path`` exists."""

    async def check() -> bool:
        return os.path.exists(path)  # noqa: ASYNC240 - a tiny local marker file

    return check


def of_type(events: list[Event], *types: EventType) -> list[Event]:
    return [e for e in events if e.type in types]


def record_result_waits(monkeypatch: Any) -> list[float | None]:
    """The timeouts of every wait ``RunHandle.result()`` makes from now on (for a hint, or
    its poll's pause), in order; the waits themselves happen as before."""
    import types

    from wayline import client as client_module

    waits: list[float | None] = []
    real_wait = asyncio.wait

    async def wait(*args: Any, **kwargs: Any) -> Any:
        waits.append(kwargs.get("timeout"))
        return await real_wait(*args, **kwargs)

    monkeypatch.setattr(
        client_module, "asyncio", types.SimpleNamespace(wait=wait, sleep=asyncio.sleep)
    )
    return waits
