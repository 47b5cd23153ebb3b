"""A run's large input and output in the console: the run's JSON carries their size, the
first KiB and a link; the link streams the whole value from the blob store (docs/console.md).

A payload of a few MiB inlined in the run's JSON would be read, encoded, sent and parsed again
at every refresh of the run page (the live feed refreshes it at every change); a link read
once, when someone asks for it, costs nothing until then."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

from starlette.responses import Response, StreamingResponse

from ..._core.projections import HookView
from ...client import Client
from ...errors import BlobMissingError
from ...world import RunInfo, World
from ...world.blobs import blob_ref, is_ref, payload_field
from ...world.ports.blobs import CHUNK_BYTES, BlobRef, PayloadField, prepended
from .errors import ApiError

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


async def shown(world: World, info: RunInfo, run: dict[str, Any], which: PayloadField) -> None:
    """Replace a large ``run[which]`` (a run's JSON, made from the run's view as stored) by
    null, with ``<which>Payload``: ``{bytes, preview, href}``; a small one stays, with
    ``<which>Payload`` null. A value kept in a blob is measured by its reference and only its
    first KiB is read: the run's JSON of a 50 MB input reads 1 KiB of it, not 50 MB. A small
    blob that is gone (or a reference no writer makes) is said at its place, as a step's
    result is, with the error its link answers: the rest of the run is still shown."""
    href = f"/api/runs/{info.run_id}/{which}"
    ref = payload_field(info, which)
    if ref is None and is_ref(run[which]):
        run[which], run[f"{which}Payload"] = None, malformed_link(world, info.run_id, href)
        return
    linked = await payload_link(world, info.run_id, run[which], ref, href)
    run[f"{which}Payload"] = linked
    if linked is not None:
        run[which] = None
    elif ref is not None:  # a small blob (a world with a low inline threshold)
        try:
            run[which] = await read_whole(world, info.run_id, ref)
        except BlobMissingError as err:
            run[which], run[f"{which}Payload"] = None, unreadable(ref.size, href, err)


async def payload_link(
    world: World,
    run_id: str,
    value: Any,
    ref: BlobRef | None,
    href: str,
    inline: int = INLINE_BYTES,
) -> dict[str, Any] | None:
    """``{bytes, preview, href}`` for a stored value (``value``, or its blob ``ref``) whose
    JSON is over ``inline`` bytes; None for a smaller one. A blob's size is its reference's,
    and its preview its first chunk: nothing more of it is read."""
    if ref is not None:
        if ref.size <= inline:
            return None
        try:
            preview = await _first_kib(world, run_id, ref)
        except BlobMissingError as err:
            return unreadable(ref.size, href, err)
        return {"bytes": ref.size, "preview": preview, "href": href}
    data = encoded(value)
    if len(data) <= inline:
        return None
    # ASCII (json.dumps escapes the rest), so the cut never splits a character
    return {"bytes": len(data), "preview": data[:PREVIEW_BYTES].decode(), "href": href}


def unreadable(size: int, href: str, err: BlobMissingError) -> dict[str, Any]:
    """The link of a value that cannot be read (its blob is gone, or its reference is
    malformed): the run's page still opens, and says at the value's place why; the link
    answers the same error (``409 CORRUPT_LOG``) before any byte."""
    return {
        "bytes": size,
        "preview": "",
        "href": href,
        "error": {"code": err.code, "message": err.message},
    }


async def inline_or_link(
    world: World, run_id: str, stored: Any, href: str, inline: int
) -> tuple[Any, dict[str, Any] | None]:
    """A value of the run's fold as the run's JSON sends it: ``(value, None)`` inline, or
    ``(None, link)`` for one over ``inline`` bytes, a malformed reference, or a small blob
    that cannot be read (gone behind the world's back: it is said at its place, so the
    run's page still opens, as for a large one)."""
    ref = blob_ref(stored)
    if ref is None and is_ref(stored):
        return None, malformed_link(world, run_id, href)
    linked = await payload_link(world, run_id, stored, ref, href, inline)
    if linked is not None:
        return None, linked
    if ref is None:
        return stored, None
    try:  # a small blob (a world with a low inline threshold)
        return await read_whole(world, run_id, ref), None
    except BlobMissingError as err:
        return None, unreadable(ref.size, href, err)


async def _first_kib(world: World, run_id: str, ref: BlobRef) -> str:
    """The blob's first :data:`PREVIEW_BYTES`, read as one chunk; ``BlobMissingError`` when
    the blob is gone."""
    chunks = world.blob_chunks(run_id, ref, PREVIEW_BYTES)
    try:
        first = await anext(chunks, b"")
    finally:
        close = getattr(chunks, "aclose", None)  # ends the read (a SQLite connection's own)
        if close is not None:
            await close()
    return first.decode(errors="replace")


async def read_whole(world: World, run_id: str, ref: BlobRef | None) -> Any:
    """A small blob's value (under the inline size: cheap to read whole)."""
    if ref is None:  # a reference no writer makes: the run's log is fenced where it is read
        raise BlobMissingError(run_id, 0, "a malformed reference", store=type(world).__name__)
    data = b"".join([chunk async for chunk in world.blob_chunks(run_id, ref)])
    return json.loads(data)


async def streamed(client: Client, run_id: str, which: PayloadField) -> StreamingResponse:
    """The run's input or output as JSON, in chunks: from its blob when it is stored out of
    line, else encoded here. A blob that is missing, or holds other bytes, raises
    ``BlobMissingError`` before the response starts, so the caller gets a typed error
    instead of a cut-off body."""
    world = client.world
    ref = await world.payload_blob(run_id, which)
    if ref is None:
        info = await client.get_run(run_id)  # RunNotFoundError when there is no run
        return await value_response(world, run_id, info.input if which == "input" else info.output)
    return await value_response(world, run_id, None, ref)


async def value_response(
    world: World, run_id: str, value: Any, ref: BlobRef | None = None
) -> StreamingResponse:
    """``value`` as JSON, in chunks, or the blob ``ref`` names (a value stored out of line),
    streamed from the world's blob store; its first chunk is read before the response starts,
    so a blob that is gone is a typed error (``409 CORRUPT_LOG``) rather than a cut-off body."""
    chunks = _sliced(encoded(value)) if ref is None else world.blob_chunks(run_id, ref)
    first = await anext(chunks, b"")
    return StreamingResponse(
        prepended(first, chunks),
        media_type="application/json",
        headers={"Cache-Control": "no-cache"},
    )


HOOK_PAYLOAD_INLINE_BYTES = 4096
"""The largest hook payload, as JSON, sent with its hook in the run's JSON (as for a step's
result): a larger one is its size, its first KiB and a link
(``GET /api/runs/{id}/hooks/{hook}/payloads/{n}``). A hook's JSON carries some of its
payloads alone (:mod:`.hook_pages`)."""


def malformed_link(world: World, run_id: str, href: str) -> dict[str, Any]:
    """The link of a value whose reference in the log no writer makes (written behind the
    world's back): said as for a blob that is gone (:func:`unreadable`)."""
    err = BlobMissingError(run_id, 0, "a malformed reference", store=type(world).__name__)
    return unreadable(0, href, err)


async def stored_value(client: Client, run_id: str, stored: Any) -> StreamingResponse:
    """A value of the run's fold as JSON, streamed: from its blob when the log holds its
    reference; a reference that names no blob is ``409 CORRUPT_LOG`` before any byte."""
    ref = blob_ref(stored)
    if ref is None and is_ref(stored):  # a reference the log holds but no blob it names
        raise BlobMissingError(run_id, 0, "the value names no blob this world has", store="the log")
    return await value_response(client.world, run_id, stored, ref)


HOOK_ID_CHARS = 200
"""The longest hook id a payload link may name: ids are short (``h3``), so a longer one is a
link this server never gave."""


def hook_of(hooks: Mapping[str, HookView], hook_id: str) -> HookView:
    """The run's hook whose id is ``hook_id``; a typed 4xx for an id no hook of the run has."""
    if not hook_id or len(hook_id) > HOOK_ID_CHARS or not hook_id.isascii():
        raise ApiError(400, "BAD_REQUEST", "hook is not a hook id of this run (a hook's id)")
    if hook_id not in hooks:
        raise ApiError(404, "HOOK_NOT_FOUND", f"the run has no hook {hook_id!r}")
    return hooks[hook_id]


PAYLOAD_NUMBER_DIGITS = 9
"""The most digits a payload's number in a link may have (the OpenAPI document's maximum): no
hook takes a billion payloads, and a longer number is refused before it is read."""


def payload_index(given: str, hook: HookView) -> int:
    """Which of the hook's payloads a link names: 0 the first, 1 the first of ``later``...; a
    typed 4xx for one the hook has not received."""
    if not given.isascii() or not given.isdigit() or len(given) > PAYLOAD_NUMBER_DIGITS:
        raise ApiError(400, "BAD_REQUEST", "n is not a payload's number (0 for the first)")
    n = int(given)
    received = (hook.received_at is not None) + len(hook.later)
    if n >= received:
        raise ApiError(404, "PAYLOAD_NOT_FOUND", f"hook {hook.cid!r} has no payload {n}")
    return n


def story_info(info: RunInfo) -> RunInfo:
    """The run's view as stored, with its input or output kept in a blob written as its size,
    for the run's story (``runs show``) the page prints: the story cuts every value it prints,
    and the whole one is read from its link. The values of the run's fold it prints are
    :func:`noted` as they are printed (``render_show``'s ``noted``)."""
    changes = {k: noted(getattr(info, k)) for k in ("input", "output") if is_ref(getattr(info, k))}
    return replace(info, **changes) if changes else info


def noted(value: Any) -> Any:
    """A value of the fold as the story prints it: one kept in a blob is its size."""
    if not is_ref(value):
        return value
    return f"({value.get('bytes')} bytes, stored out of line)"


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
