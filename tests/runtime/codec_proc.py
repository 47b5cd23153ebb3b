"""A process on one codec and one event loop (``WAYLINE_CODEC``, ``WAYLINE_LOOP``), for
``test_codecs_and_loops``: ``python -m tests.runtime.codec_proc URL [RUN_ID ...]`` runs one
``codec_trip.echo`` with its own worker, reads the result and events of each run named (which
other processes wrote, on other codecs), and prints one JSON line: its codec and loop, its
run's id and result, and what it read."""

from __future__ import annotations

import json
import sys
from typing import Any

import wayline
from wayline._core import jsoncodec
from wayline.loops import new_event_loop

PAYLOAD: dict[str, Any] = {
    "text": "é ✓ \U0001f600 \u2028",
    "big": 2**80,
    "small": 1e-7,
    "huge": 1e300,
    "neg0": -0.0,
    "none": None,
    "order": {"zulu": 1, "alpha": [1, 2.5, "x", {}], "mike": {"b": None}},
}


@wayline.step(name="codec_trip.shout")
async def shout(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "text": payload["text"] + "!"}


@wayline.workflow(name="codec_trip.echo")
async def echo(payload: dict[str, Any]) -> dict[str, Any]:
    first = await shout(payload)
    return await shout(first)


async def main(url: str, others: list[str]) -> dict[str, Any]:
    async with wayline.open_world(url) as world, wayline.Worker(world, [echo]):
        client = wayline.Client(world)
        handle = await client.start(echo, PAYLOAD)
        result = await handle.result(timeout=60)
        read = {}
        for run_id in others:
            other = client.handle(run_id)
            events = [[str(e.type), e.data] for e in await other.events()]
            read[run_id] = {"result": await other.result(timeout=60), "events": events}
        return {"run_id": handle.run_id, "result": result, "read": read}


if __name__ == "__main__":
    loop = new_event_loop()
    try:
        out = loop.run_until_complete(main(sys.argv[1], sys.argv[2:]))
    finally:
        loop.close()
    out.update(codec=jsoncodec.NAME, loop=type(loop).__module__)
    print(json.dumps(out))
