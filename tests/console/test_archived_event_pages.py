"""An archived run's events are paged from the archive a page at a time (issue #37): each
``/events`` page of a long archived run reads that page's part of the archive's copy (an index
range of ``events_archive`` on SQLite, the index and one or two chunks on NATS), never the
whole copy, which a walk of a 50,000-event run read once a page. Counted by a spy on the
world's read of its archive (rows on SQLite, message bytes on NATS), not timed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

import wayline
from tests.archived_runs import long_archived_run
from wayline.cli.console import create_app
from wayline.world import World

STEPS = 4997  # with created, started and completed: 5,000 events
PAGE = 100


def _spy(world: World, monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[[], int], int]:
    """A counter of what the world reads from its archive (SQLite: rows; NATS: bytes of
    archive messages), and what a read of the whole copy counts."""
    read = [0]
    if type(world).__name__ == "LocalWorld":
        retention = world._retention  # type: ignore[attr-defined]
        together, single = retention._read_together, retention._read

        def read_together(*queries: Any) -> list[list[Any]]:
            results = together(*queries)
            read[0] += sum(len(rows) for rows in results)
            return results  # type: ignore[no-any-return]

        def read_one(*args: Any) -> list[Any]:
            rows = single(*args)
            read[0] += len(rows)
            return rows  # type: ignore[no-any-return]

        monkeypatch.setattr(retention, "_read_together", read_together)
        monkeypatch.setattr(retention, "_read", read_one)
        return lambda: read[0], STEPS + 3
    from wayline.worlds.nats import direct
    from wayline.worlds.nats import retention as module

    batch, subject = direct.direct_batch, direct.read_subject

    async def direct_batch(*args: Any, **kwargs: Any) -> Any:
        msgs, pending = await batch(*args, **kwargs)
        read[0] += sum(len(m.data) for m in msgs)
        return msgs, pending

    async def read_subject(*args: Any, **kwargs: Any) -> Any:
        msgs = await subject(*args, **kwargs)
        read[0] += sum(len(m.data) for m in msgs)
        return msgs

    monkeypatch.setattr(module, "direct_batch", direct_batch, raising=False)
    monkeypatch.setattr(module, "read_subject", read_subject)
    return lambda: read[0], 0


async def test_a_page_of_a_long_archived_run_reads_its_part_of_the_archive(
    make_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await long_archived_run(await make_world(), STEPS, "apage")
    world = await make_world()  # nothing cached
    count, whole = _spy(world, monkeypatch)
    if not whole:  # NATS: the bytes of the whole copy, as a read of it counts them
        await world.archived_run(run_id)
        whole = count()
    app = create_app(wayline.Client(world), world_url="test")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as h:
        for after in (0, 2000, 4900):
            before = count()
            got = await h.get(f"/api/runs/{run_id}/events", params={"after": after, "limit": PAGE})
            assert got.status_code == 200, got.text
            page = got.json()
            read = count() - before
            assert [e["seq"] for e in page["events"]] == list(range(after + 1, after + PAGE + 1))
            assert page["eventCount"] == STEPS + 3
            assert page["nextCursor"] == (None if after == 4900 else str(after + PAGE))
            # the page's part: at most two chunks of 1,000 events of the five (NATS), or the
            # page's rows and the run's (SQLite), never the whole copy
            assert read * 2 < whole, (after, read, whole)
