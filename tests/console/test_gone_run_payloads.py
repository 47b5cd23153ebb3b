"""A run's input or output kept in a small blob that is gone, on every world: the run's JSON
still answers, says at the value's place why it cannot be read (``CORRUPT_LOG``, with the
link's href), and shows the rest of the run; the link itself answers 409 before any byte."""

from __future__ import annotations

import wayline
from tests.blobs.stores import remove_blob
from tests.console.conftest import Console, fresh_console
from tests.console.test_hostile_hook_shapes import LOW_INLINE_BYTES, SMALL_BLOB_CHARS, echo


@wayline.workflow(name="gone_run_payloads.flow")
async def flow(text: str) -> str:
    return (await echo(text)).upper()


async def test_a_run_whose_small_input_and_output_blobs_are_gone_still_shows_its_steps(
    console: Console,
) -> None:
    low = await console.engine.make_world(inline_payload_bytes=LOW_INLINE_BYTES)
    client = wayline.Client(low)
    text = "i" * SMALL_BLOB_CHARS
    async with console.engine.worker([flow], world=low):
        run = await client.start(flow, text)
        assert await run.result(timeout=20) == text.upper()
    stored = await client.get_run(run.run_id)  # the values as stored, read back whole
    for value in (stored.input, stored.output):
        await remove_blob(low, run.run_id, value)  # behind the world's back
    async with fresh_console(console.engine, inline_payload_bytes=LOW_INLINE_BYTES) as http:
        response = await http.get(f"/api/runs/{run.run_id}")
        assert response.status_code == 200, response.text  # the run's page still opens
        shown = response.json()
        assert shown["status"] == "completed"
        (step,) = shown["steps"]  # the rest of the run is there: its step and its result
        assert step["result"] == text and step["resultPayload"] is None
        for which in ("input", "output"):
            linked = shown[f"{which}Payload"]
            assert shown[which] is None
            assert linked["error"]["code"] == "CORRUPT_LOG", linked
            assert f"run {run.run_id}" in linked["error"]["message"]
            assert linked["href"] == f"/api/runs/{run.run_id}/{which}"
            gone = await http.get(linked["href"])
            assert gone.status_code == 409 and gone.json()["error"]["code"] == "CORRUPT_LOG"
