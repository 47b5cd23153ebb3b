"""A process on one codec and one event loop (``WAYLINE_CODEC``, ``WAYLINE_LOOP``), for
``test_codecs_and_loops``: ``python -m tests.runtime.codec_proc URL [RUN_ID ...]`` runs one
``old_release_trip.echo`` with its own worker, reads the result and events of each run named (which
other processes wrote, on other codecs), and prints one JSON line: its codec and loop, its
run's id and result, and what it read."""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.runtime import old_release_proc
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


async def main(url: str, others: list[str]) -> dict[str, Any]:
    """The trip of ``old_release_proc`` (public API only, so an old release runs it too)."""
    return await old_release_proc.main(url, others, PAYLOAD)


if __name__ == "__main__":
    loop = new_event_loop()
    try:
        out = loop.run_until_complete(main(sys.argv[1], sys.argv[2:]))
    finally:
        loop.close()
    out.update(codec=jsoncodec.NAME, loop=type(loop).__module__)
    print(json.dumps(out))
