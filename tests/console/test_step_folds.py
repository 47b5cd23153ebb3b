"""The steps API keeps each run's fold between pages: the pages of a run that moves between
reads are the same as those of a console that folds the whole log for every page, and one
fold of the log serves every page, brought forward by the new events alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette

from tests.console.conftest import Console
from tests.console.step_logs import append_steps, step_events, unserved_run
from wayline._core.events import EventType, NewEvent
from wayline.cli.console import create_app
from wayline.start_options import StartOptions


def new_steps(first: int, end: int, status: str = "completed") -> list[NewEvent]:
    return [
        e for i in range(first, end) for e in step_events(f"s{i}", f"step_folds.s{i}", 0, status)
    ]


@asynccontextmanager
async def http_of(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        yield http


async def test_pages_of_a_moving_run_are_those_of_a_fold_per_page(console: Console) -> None:
    client, world = console.engine.client, console.engine.world
    run_id = await unserved_run(client, "step_folds.moving")
    await append_steps(
        world,
        run_id,
        [(f"s{i}", f"step_folds.s{i}", 0, "completed" if i < 25 else "running") for i in range(30)],
    )
    cached_app = create_app(client, world_url="test://world")
    plain_app = create_app(client, world_url="test://world", kept_folds=0)
    moves: list[list[NewEvent]] = [
        # an earlier step ends and new ones start: the page after reads on from its cursor
        [NewEvent(EventType.STEP_COMPLETED, "s25", {"result": 25}), *new_steps(30, 31)],
        new_steps(31, 40),
        new_steps(40, 41, "failed"),
    ]
    pages: list[Any] = []
    async with http_of(cached_app) as cached, http_of(plain_app) as plain:
        cursor: str | None = "0"
        while cursor is not None:
            url = f"/api/runs/{run_id}/steps?after={cursor}&limit=8"
            page = (await cached.get(url)).json()
            assert page == (await plain.get(url)).json()
            pages.append(page)
            cursor = page["nextCursor"]
            if len(pages) in (1, 3, 4):  # the second read finds the run as it was
                await world.append(run_id, moves.pop(0))
        # the group of a name, from the same kept fold
        grouped = (await cached.get(f"/api/runs/{run_id}/steps?group=step_folds.s3")).json()
        assert grouped == (await plain.get(f"/api/runs/{run_id}/steps?group=step_folds.s3")).json()
    names = [s["name"] for page in pages for s in page["steps"]]
    assert names == [f"step_folds.s{i}" for i in range(len(names))]
    assert pages[-1]["stepCount"] == len(names)
    statuses = {s["name"]: s["status"] for page in pages for s in page["steps"]}
    assert (statuses["step_folds.s25"], statuses["step_folds.s40"]) == ("completed", "failed")
    cached_folds, plain_folds = cached_app.state.folds, plain_app.state.folds
    # one whole fold served every page; each later read applied only what was new
    assert (cached_folds.folds, plain_folds.folds) == (1, len(pages) + 1)
    assert (cached_folds.catch_ups, len(pages)) == (3, 6)


async def test_a_kept_fold_follows_its_run_s_deletion_and_a_new_run_under_its_id(
    console: Console,
) -> None:
    client, world = console.engine.client, console.engine.world
    options = StartOptions(id="step-folds-again")
    first = await client.start_with(options, "step_folds.again")
    await world.append(first.run_id, [NewEvent(EventType.RUN_STARTED)])
    await append_steps(world, first.run_id, [("a0", "step_folds.old", 0, "completed")])
    url = f"/api/runs/{first.run_id}/steps"
    assert [s["name"] for s in (await console.http.get(url)).json()["steps"]] == ["step_folds.old"]
    await client.terminate(first.run_id, "done with it")
    await world.delete_runs(older_than=0)
    gone = await console.http.get(url)
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "RUN_NOT_FOUND")

    again = await client.start_with(options, "step_folds.again")
    assert again.run_id == first.run_id  # the business id names the same run id
    await world.append(again.run_id, [NewEvent(EventType.RUN_STARTED)])
    await append_steps(world, again.run_id, [("b0", "step_folds.new", 0, "running")])
    steps = (await console.http.get(url)).json()["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [("step_folds.new", "running")]
