"""The console's schedules: those of ``wayline schedules`` (a file, not the world), each with
its next tick and the run its last tick started, read from the parametrised world; a file the
schedulers could not read is a typed 503, not a 500."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.console import flows
from tests.console.conftest import AUTH, TOKEN, Console
from wayline import StartOptions
from wayline.cli import main
from wayline.cli.console import create_app
from wayline.cli.schedules import tick_run_id


async def test_schedules_with_their_next_tick_and_last_run(
    console: Console, tmp_path: Path
) -> None:
    file = tmp_path / "schedules.json"
    nowhere = f"sqlite:///{tmp_path / 'none.db'}"  # the add's "no worker" look finds no world
    added = ["schedules", "add", "nightly", "--cron", "0 2 * * *", "--workflow", "greet"]
    assert await asyncio.to_thread(main, [*added, "--file", str(file), "--world", nowhere]) == 0
    # a tick as `schedules run` takes one: its run id derived from the tick, then recorded
    stored = json.loads(file.read_text())
    tick = stored["nightly"]["created"] - 3600
    run_id = tick_run_id(stored["nightly"], tick)
    client = console.engine.client
    async with console.engine.worker([flows.greet]):
        handle = await client.start_with(StartOptions(run_id=run_id), flows.greet, "night")
        await handle.result(timeout=10)
    stored["nightly"]["lastTick"] = tick
    file.write_text(json.dumps(stored))

    app = create_app(client, schedules_file=file)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        [shown] = (await http.get("/api/schedules")).json()["schedules"]
        assert (shown["name"], shown["cron"], shown["workflow"]) == (
            "nightly",
            "0 2 * * *",
            "greet",
        )
        assert shown["next"].endswith("T02:00:00Z")
        assert (shown["lastRunId"], shown["lastRunStatus"]) == (run_id, "completed")

        file.write_text("{not json")
        broken = await http.get("/api/schedules")
        assert broken.status_code == 503
        assert broken.json()["error"]["code"] == "CONFIGURATION_ERROR"


async def test_a_schedule_suspended_and_resumed_through_the_api(
    console: Console, tmp_path: Path
) -> None:
    file = tmp_path / "schedules.json"
    nowhere = f"sqlite:///{tmp_path / 'ticks.db'}"  # the scheduler's own world: no worker
    added = ["schedules", "add", "hourly", "--cron", "0 * * * *", "--workflow", "greet"]
    assert await asyncio.to_thread(main, [*added, "--file", str(file), "--world", nowhere]) == 0
    stored = json.loads(file.read_text())
    stored["hourly"]["created"] -= 2 * 3600  # so that a tick is due now, on the clock
    file.write_text(json.dumps(stored))
    run_once = ["schedules", "run", "--once", "--file", str(file), "--world", nowhere]

    read_only = create_app(console.engine.client, schedules_file=file)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=read_only), base_url="http://console"
    ) as http:
        refused = await http.post("/api/schedules/hourly/suspend")
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "READ_ONLY")

    app = create_app(console.engine.client, token=TOKEN, schedules_file=file)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://console"
    ) as http:
        no_token = await http.post("/api/schedules/hourly/suspend")
        assert no_token.status_code == 401
        unknown = await http.post("/api/schedules/weekly/suspend", headers=AUTH)
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (
            404,
            "SCHEDULE_NOT_FOUND",
        )
        done = await http.post("/api/schedules/hourly/suspend", headers=AUTH)
        assert done.json() == {"name": "hourly", "suspended": True}
        [shown] = (await http.get("/api/schedules")).json()["schedules"]
        assert (shown["suspended"], shown["next"]) == (True, "-")

        # a suspended schedule's due tick is not started
        assert await asyncio.to_thread(main, run_once) == 0
        assert "lastRun" not in json.loads(file.read_text())["hourly"]

        done = await http.post("/api/schedules/hourly/resume", headers=AUTH)
        assert done.json() == {"name": "hourly", "suspended": False}
        [shown] = (await http.get("/api/schedules")).json()["schedules"]
        assert "suspended" not in shown and shown["next"].endswith(":00:00Z")

    # resumed: the latest tick missed meanwhile starts
    assert await asyncio.to_thread(main, run_once) == 0
    assert json.loads(file.read_text())["hourly"]["lastRun"].startswith("wf_")
