"""A process for ``test_old_release_interop``, written against the public API alone so that
an old release's runtime can run it too: ``python -m tests.runtime.old_release_proc URL
[RUN_ID ...]`` runs one ``old_release_trip.echo`` with its own worker, reads the result and
the events of each run named (written by the other release), and prints one JSON line."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import wayline

PAYLOAD: dict[str, Any] = {
    "text": "é ✓ \U0001f600 \u2028",
    "big": 2**80,
    "tiny": 1e-05,  # orjson writes 0.00001, json 1e-05
    "huge": 1e16,
    "neg0": -0.0,
    "none": None,
    "order": {"zulu": 1, "alpha": [1, 2.5, "x", {}], "mike": {"b": None}},
}


@wayline.step(name="old_release_trip.shout")
async def shout(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "text": payload["text"] + "!"}


@wayline.workflow(name="old_release_trip.echo")
async def echo(payload: dict[str, Any]) -> dict[str, Any]:
    first = await shout(payload)
    return await shout(first)


async def main(url: str, others: list[str], payload: Any = PAYLOAD) -> dict[str, Any]:
    """Run ``echo(payload)`` with a worker and read the runs ``others`` (``codec_proc`` too)."""
    async with wayline.open_world(url) as world, wayline.Worker(world, [echo]):
        client = wayline.Client(world)
        handle = await client.start(echo, payload)
        result = await handle.result(timeout=60)
        read = {}
        for run_id in others:
            other = client.handle(run_id)
            events = [[str(e.type), e.data] for e in await other.events()]
            read[run_id] = {"result": await other.result(timeout=60), "events": events}
        return {"run_id": handle.run_id, "result": result, "read": read, "from": wayline.__file__}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:]))))
