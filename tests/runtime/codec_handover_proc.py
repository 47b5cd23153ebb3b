"""A process for ``test_codec_handover``: ``python -m tests.runtime.codec_handover_proc URL
MARKER start|resume``. ``start`` starts ``codec_handover.flow`` under the business id in
``MARKER``'s name and runs it with its own worker, whose second step kills the process the
first time (it writes its codec to ``MARKER`` first); ``resume`` runs a worker that recovers
the run and prints one JSON line: the result and the codec that finished the step."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import wayline
from wayline._core import jsoncodec

PAYLOAD: dict[str, Any] = {"floats": [1e-05, 1e16, -0.0, 5e-324] * 50, "text": "é ✓ \u2028"}
MARKER = Path(os.environ.get("CODEC_HANDOVER_MARKER", "/nonexistent"))


@wayline.step(name="codec_handover.first")
async def first(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "steps": 1}


def _die_the_first_time() -> None:
    if not MARKER.exists():
        MARKER.write_text(jsoncodec.NAME)
        os._exit(9)  # a worker killed mid-body: the next one re-runs the step from the log


@wayline.step(name="codec_handover.second")
async def second(payload: dict[str, Any]) -> dict[str, Any]:
    _die_the_first_time()
    return {**payload, "steps": payload["steps"] + 1, "by": jsoncodec.NAME}


@wayline.workflow(name="codec_handover.flow")
async def flow(payload: dict[str, Any]) -> dict[str, Any]:
    return await second(await first(payload))


async def main(url: str, start: bool) -> dict[str, Any]:
    business_id = f"codec-handover-{MARKER.name}"
    async with wayline.open_world(url) as world, wayline.Worker(world, [flow]):
        client = wayline.Client(world)
        if start:
            await client.start_with(wayline.StartOptions(id=business_id), flow, PAYLOAD)
        result: dict[str, Any] = await client.handle(business_id).result(timeout=90)
        return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2] == "start"))))
