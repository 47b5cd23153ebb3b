"""The workers page's queue lag on every world: a run started by name while no worker of its
workflow is live waits on the workflow's route, counted as ready for the registry's entry of
that workflow and listed by topic, with when it became due."""

from __future__ import annotations

from typing import Any

import wayline
from tests.console.conftest import Console


@wayline.workflow(name="queue_lag.idle")
async def idle() -> str:
    return "done"


async def test_a_run_nobody_takes_shows_as_queue_lag(console: Console) -> None:
    client = console.engine.client
    async with console.engine.worker([idle]):
        pass  # registered, then gone: its entry stays, and nobody takes the next run
    before = (await console.http.get("/api/workers")).json()
    handle = await client.start("queue_lag.idle")
    after = (await console.http.get("/api/workers")).json()

    def entry(page: dict[str, Any]) -> dict[str, Any]:
        [found] = [e for e in page["served"] if e["workflow"] == "queue_lag.idle"]
        return dict(found)

    assert entry(before)["ready"] == 0 and entry(before)["oldestReadyAt"] is None
    assert entry(after)["ready"] == 1
    assert entry(after)["oldestReadyAt"] <= after["now"] + 5  # the store's clock, a bound
    assert {q["topic"]: q["ready"] for q in after["queues"]}["flow:w:queue_lag.idle"] == 1
    assert handle.run_id in [r["runId"] for r in after["waiting"]]
