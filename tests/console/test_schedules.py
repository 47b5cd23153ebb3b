"""The console's schedules: those of ``wayline schedules`` (a file, not the world), each with
its next tick and the run its last tick started, read from the parametrised world; a file the
schedulers could not read is a typed 503, not a 500."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.console import flows
from tests.console.conftest import Console
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
