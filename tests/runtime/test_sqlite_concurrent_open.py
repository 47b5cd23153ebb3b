"""Several processes starting on one new SQLite file at the same moment (a supervisor's worker
processes do): every one opens it. SQLite answers some setup conflicts (the switch to WAL, a
read upgraded to a write) at once instead of waiting for ``busy_timeout``; the world tries
those again."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

PROCESSES = 6
ROUNDS = 8


def _open(
    path: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    import asyncio

    from wayline.world.open import open_world

    async def main() -> str:
        world = open_world(f"sqlite:///{path}")
        barrier.wait()
        try:
            await world.start()
        except Exception as err:  # reported to the test, which fails on it
            return f"{type(err).__name__}: {err}"
        finally:
            await world.close()
        return "ok"

    out.put(asyncio.run(main()))


def _forkserver() -> multiprocessing.context.ForkServerContext:
    # Each process is forked from a server that imported the world once: the same separate
    # processes racing on one file, without 48 interpreters importing the package (a spawn
    # each took about a second under load and made this the suite's slowest test).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["wayline.world.open", "wayline.worlds.local"])
    return ctx


def _opened_at_once(ctx: multiprocessing.context.ForkServerContext, path: str) -> list[str]:
    """What each of PROCESSES processes said when they all opened ``path`` at one moment."""
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(path, barrier, out)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return results


def test_processes_starting_on_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    ctx = _forkserver()
    for round_ in range(ROUNDS):
        results = _opened_at_once(ctx, str(tmp_path / f"w{round_}.db"))
        assert results == ["ok"] * PROCESSES, (round_, results)


def _a_file_from_before_held_hand_backs(path: str) -> None:
    """A database as the version before ``messages.held_handbacks`` left it, one message in."""
    import asyncio
    import sqlite3

    from wayline.worlds.local import LocalWorld

    async def made() -> None:
        async with LocalWorld(Path(path)) as world:
            await world.enqueue("concurrent-open.old", {"n": 0})

    asyncio.run(made())
    old = sqlite3.connect(path)
    old.execute("ALTER TABLE messages DROP COLUMN held_handbacks")
    old.commit()
    old.close()


def test_processes_starting_on_one_file_that_needs_migrating_all_open_it(tmp_path: Path) -> None:
    """An upgrade's worker processes start at once on a file an older version wrote: each one
    sees a column missing, and every one must open the file, not only the first to add it (the
    others failed WORLD_UNAVAILABLE, duplicate column name: held_handbacks)."""
    ctx = _forkserver()
    for round_ in range(3):
        path = str(tmp_path / f"old{round_}.db")
        _a_file_from_before_held_hand_backs(path)
        results = _opened_at_once(ctx, path)
        assert results == ["ok"] * PROCESSES, (round_, results)
