"""A run's large input and output in the console: the run's JSON carries their size, the
first KiB and a link; the link streams the whole value from the blob store (docs/console.md).

A payload of a few MiB inlined in the run's JSON would be read, encoded, sent and parsed again
at every refresh of the run page (the live feed refreshes it at every change); a link read
once, when someone asks for it, costs nothing until then."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from ...client import Client
from ...world.ports.blobs import CHUNK_BYTES, PayloadField, prepended

INLINE_BYTES = 64 * 1024
"""A run's input or output whose JSON is larger than this is not inlined in the run's JSON:
64 KiB is about what a browser shows in a table cell before the page slows down."""

PREVIEW_BYTES = 1024
"""How much of a large payload's JSON the run's JSON carries (the page shows it)."""


def encoded(value: Any) -> bytes:
    """A payload's JSON as the worlds store it (compact), so a streamed inline value and a
    streamed blob are the same bytes for the same value; what JSON has no type for is written
    as its text, as the console's other replies do."""
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def shown(run: dict[str, Any], which: PayloadField) -> None:
    """Replace a large ``run[which]`` (a run's JSON) by null, with ``<which>Payload``:
    ``{bytes, preview, href}``; a small one stays, with ``<which>Payload`` null."""
    data = encoded(run[which])
    if len(data) <= INLINE_BYTES:
        run[f"{which}Payload"] = None
        return
    run[which] = None
    run[f"{which}Payload"] = {
        "bytes": len(data),
        # ASCII (json.dumps escapes the rest), so the cut never splits a character
        "preview": data[:PREVIEW_BYTES].decode(),
        "href": f"/api/runs/{run['runId']}/{which}",
    }


async def streamed(client: Client, run_id: str, which: PayloadField) -> StreamingResponse:
    """The run's input or output as JSON, in chunks: from its blob when it is stored out of
    line, else encoded here. A blob that is missing, or holds other bytes, raises
    ``BlobMissingError`` before the response starts, so the caller gets a typed error
    instead of a cut-off body."""
    world = client.world
    ref = await world.payload_blob(run_id, which)
    chunks: AsyncIterator[bytes]
    if ref is None:
        info = await client.get_run(run_id)  # RunNotFoundError when there is no run
        chunks = _sliced(encoded(info.input if which == "input" else info.output))
    else:
        chunks = world.blob_chunks(run_id, ref)
    first = await anext(chunks, b"")
    return StreamingResponse(
        prepended(first, chunks),
        media_type="application/json",
        headers={"Cache-Control": "no-cache"},
    )


async def probed(client: Client, run_id: str, which: PayloadField) -> Response:
    """The headers :func:`streamed` would answer for a ``HEAD``, with the value's length, and
    no byte of it read: a blob's size is in the reference the run's log holds. Starlette would
    otherwise run the ``GET`` and read the whole blob for a body it then drops. Whether the blob
    still reads whole is what a ``GET`` finds out."""
    world = client.world
    ref = await world.payload_blob(run_id, which)
    if ref is not None:
        size = ref.size
    else:
        info = await client.get_run(run_id)  # RunNotFoundError when there is no run
        size = len(encoded(info.input if which == "input" else info.output))
    headers = {"Cache-Control": "no-cache", "Content-Length": str(size)}
    return Response(media_type="application/json", headers=headers)


async def _sliced(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), CHUNK_BYTES):
        yield data[start : start + CHUNK_BYTES]
