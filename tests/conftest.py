"""Shared fixtures. ``make_world`` / ``world`` are parametrised over every world; the contract
suite (tests/contract) runs unchanged on each of them."""

from __future__ import annotations

import asyncio
import inspect
import os
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from wayline.world import World

pytest_plugins = ["tests.nats_fixtures", "tests.toxiproxy", "tests.small_disk"]

WorldFactory = Callable[..., Awaitable[World]]

WORLD_KINDS = ["local"]
try:  # the NATS world registers its parameter when its fixture module is present
    from tests.nats_fixtures import NATS_AVAILABLE  # noqa: F401

    WORLD_KINDS.append("nats")
except ImportError:  # pragma: no cover - until the NATS world exists
    pass


# Hypothesis's defaults judge time: an example slower than 200 ms, or drawing that looks slow,
# fails the test, and on this 2-core machine a suite of three processes (or a loaded developer
# machine) made a property about fair turns fail at 227-255 ms. Properties here are about
# values, not time, so neither check is made. In CI (``CI=true``) the examples are drawn from a
# fixed seed, so a run's outcome is its commit's: a draw that fails is found by a local run
# (random there, with its example database) and pinned with ``@example``.
settings.register_profile(
    "wayline",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") == "true",
)
settings.load_profile("wayline")


def require_all_components() -> bool:
    """In CI a missing component is a failure, never a skip."""
    return os.environ.get("WAYLINE_REQUIRE_ALL_COMPONENTS") == "1" or os.environ.get("CI") == "true"


@pytest.fixture(scope="session", autouse=True)
def _zygote_ended() -> Iterator[None]:
    """The CLI zygote (tests/operator/zygote.py, ``cli_zygote``), which any test's process
    starts may have started, ended with the session and its children left with it."""
    yield
    from tests.operator.zygote import close_cli_zygote

    close_cli_zygote()


@pytest.fixture(autouse=True)
def no_self_fenced_exit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A worker running in this process exits it (``os._exit(70)``) when a step body it
    cannot cut off would run beside a redelivery: in a test, that ended the whole suite with
    no report. Here the exit fails the test that made it, with the reason logged, and the
    suite goes on. Processes forked from the test still exit as asked."""
    real, pid = os._exit, os.getpid()
    made: list[int] = []

    def exit_(code: int) -> None:
        if os.getpid() != pid:
            real(code)
        made.append(code)

    monkeypatch.setattr(os, "_exit", exit_)
    yield
    if made:
        pytest.fail(
            f"the process would have exited ({made[0]}): a step body could not be cut off "
            "(see the CRITICAL log line)",
            pytrace=False,
        )


@pytest.fixture(params=WORLD_KINDS)
async def make_world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[WorldFactory]:
    """``await make_world(**options)`` opens (and later closes) a world of the parametrised kind.
    Every call in one test shares the same store, like two processes on one database."""
    async for factory in world_factory(request, tmp_path):
        yield factory


PARTITIONED = "nats3"
"""The world kind of a NATS world of three partitions: each run's events and queue messages in
the streams of the partition its id hashes to (docs/nats.md, "Partitions")."""

PARTITIONED_WORLD_KINDS = [*WORLD_KINDS, *([PARTITIONED] if "nats" in WORLD_KINDS else [])]
"""Every real world and the partitioned NATS world: for the contract suite and the runtime
tests that say what a partitioned world must keep (steps, sleeps, hooks, children across
partitions, cancels, retries, limits, listing, cleanup)."""

ORDERED_WORLD_KINDS = ["local", "memory", *WORLD_KINDS[1:]]
"""The worlds whose queue orders ready work by priority and fairness (``_core/ordering.py``):
every world. The NATS world gives fair turns to a level's lanes, each holding the keys its
hash picks (docs/sdk.md, "Priority and fairness"), so its tests use keys of distinct lanes."""

PRIORITISED_WORLD_KINDS = ["local", "memory", *WORLD_KINDS[1:]]
"""The worlds whose queue serves the most urgent level first, with aging (rule 1 of
``_core/ordering.py``): every world."""


@pytest.fixture(params=PRIORITISED_WORLD_KINDS)
async def make_prioritised_world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[WorldFactory]:
    """``make_world`` over the worlds that serve ready work by priority, with aging."""
    async for factory in world_factory(request, tmp_path):
        yield factory


@pytest.fixture(params=ORDERED_WORLD_KINDS)
async def make_ordered_world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[WorldFactory]:
    """``make_world`` over the worlds that order ready work."""
    async for factory in world_factory(request, tmp_path):
        yield factory


async def world_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[WorldFactory]:
    """The factory behind a world fixture parametrised by kind: it closes what it opened."""
    opened: list[World] = []
    kind = request.param

    async def factory(**options: Any) -> World:
        world = await open_world_of_kind(request, tmp_path, kind, options)
        opened.append(world)
        return world

    yield factory
    for world in reversed(opened):
        await world.close()


async def open_world_of_kind(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str, options: dict[str, Any]
) -> World:
    """A started world of ``kind`` on the test's store (one file, or one NATS domain)."""
    world: World
    if kind == "local":
        from wayline.worlds.local import LocalWorld

        world = LocalWorld(tmp_path / "wayline.db", **_local_options(options))
    elif kind == "memory":  # the simulator's world: every world of a test shares its store
        from wayline.worlds.memory import MemoryStore, MemoryWorld

        store = request.node.stash.setdefault(_MEMORY_STORE, MemoryStore())
        world = MemoryWorld(store, **options)
    else:  # "nats", or "nats3": a world of three partitions (docs/nats.md, "Partitions")
        nats_factory = request.getfixturevalue("nats_world_factory")
        if kind == PARTITIONED:
            options = {"partitions": 3, **options}
        world = await nats_factory(**options)
    await world.start()
    return world


_MEMORY_STORE = pytest.StashKey[Any]()


def _local_options(options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    out.setdefault("poll_interval", 0.01)
    return out


ENGINE_LOGIC_WORLD_KINDS = ["local", "memory"]
"""The worlds a test of the engine's own logic runs on: one real world and the simulator's.
The rule that decides which tests these are, and where the NATS world's part of each is still
covered, is in docs/testing.md ("The pyramid")."""


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``engine_logic`` (one test, or a module's ``pytestmark``) whose subject is
    the engine's logic rather than what a world stores, orders, fences or survives: its
    ``make_world`` (and the ``world`` and ``engine`` built on it) takes the worlds of
    ``ENGINE_LOGIC_WORLD_KINDS`` instead of every real world. A parametrize mark on the
    fixture's name takes precedence over the fixture's own ``params``; tests of the module that
    open no world are left alone."""
    marked = metafunc.definition.get_closest_marker("engine_logic") is not None
    if marked and "make_world" in metafunc.fixturenames:
        metafunc.definition.add_marker(
            pytest.mark.parametrize("make_world", ENGINE_LOGIC_WORLD_KINDS, indirect=True)
        )
    # A test marked ``partitioned`` runs on every real world and on a NATS world of three
    # partitions too (``PARTITIONED``): its runs, their children and their messages spread
    # over the partitions' streams.
    partitioned = metafunc.definition.get_closest_marker("partitioned") is not None
    if partitioned and not marked and "make_world" in metafunc.fixturenames:
        metafunc.definition.add_marker(
            pytest.mark.parametrize("make_world", PARTITIONED_WORLD_KINDS, indirect=True)
        )


@pytest.fixture
async def world(make_world: WorldFactory) -> World:
    return await make_world()


@pytest.fixture
async def engine(make_world: WorldFactory) -> Any:
    """A world of the parametrised kind with a client; ``engine.worker([...])`` runs workers."""
    import wayline
    from tests.runtime.harness import Engine

    world = await make_world()
    return Engine(world=world, make_world=make_world, client=wayline.Client(world))


@pytest.fixture(autouse=True)
def no_pending_asyncio_tasks(request: pytest.FixtureRequest) -> None:
    """An async test that leaves a task of its own running when its fixtures have closed
    (kopf's ``_no_asyncio_pending_tasks``): the task would be cancelled unseen when the loop
    closes, hiding a worker or a poller that was never stopped. Sync tests have no loop to
    check."""
    if inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("_pending_task_guard")


@pytest.fixture
async def _pending_task_guard(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Set up before the test's other fixtures, so torn down after them: what is still
    pending then was left by the test."""
    before = asyncio.all_tasks()
    yield
    await check_no_pending_tasks(before, request.node.nodeid, request.node.path)


async def check_no_pending_tasks(before: set[asyncio.Task[Any]], nodeid: str, path: Path) -> None:
    """Fail the test at ``path`` (or warn, outside ``LEAKS_FAIL_IN``) if tasks other than
    ``before`` and the current one are still pending. A task gets a few loop turns to finish
    its own cancellation first, as a close that cancels without awaiting leaves it one turn
    short."""
    current = asyncio.current_task()
    for _ in range(LEAK_GRACE_TURNS):
        left = asyncio.all_tasks() - before - {current}
        if not left:
            return
        await asyncio.sleep(0)
    left = {task for task in asyncio.all_tasks() - before - {current} if not task.done()}
    if left:
        names = sorted(f"{task.get_name()}: {task.get_coro()!r}" for task in left)
        # WAYLINE_LEAK_LOG=file collects a whole run's list (docs/testing.md counts it).
        if log := os.environ.get("WAYLINE_LEAK_LOG"):
            with open(log, "a") as out:  # noqa: ASYNC230 - one line per leaking test
                out.write(f"{nodeid}\t{names}\n")
        message = f"asyncio tasks left pending ({len(left)}): {names}"
        if _leaks_fail(path):
            pytest.fail(message, pytrace=False)
        warnings.warn(LeakedTasks(message), stacklevel=1)


LEAK_GRACE_TURNS = 10
"""Loop turns a cancelled task gets to run its ``finally`` blocks before it counts as left."""

LEAKS_FAIL_IN = ("runtime",)
"""The folders of ``tests/`` where a test that leaves tasks pending fails: each was counted
clean (docs/testing.md, "No leaked tasks"). Elsewhere the guard still only warns."""


def _leaks_fail(path: Path) -> bool:
    tests = Path(__file__).parent
    if not path.is_relative_to(tests):
        return False
    parts = path.relative_to(tests).parts
    return len(parts) > 1 and parts[0] in LEAKS_FAIL_IN


class LeakedTasks(UserWarning):
    """A test left asyncio tasks pending, in a folder where that only warns (``LEAKS_FAIL_IN``
    lists those where it fails: see docs/testing.md)."""
