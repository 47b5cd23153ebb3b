"""The blob port: out-of-line payloads, the bytes of a large value named by its run and digest.

A world stores a payload over its inline threshold as a blob and its event carries a
reference (``wayline.world.blobs``); every event and run view a world returns has the value
again. This port is for the readers that want the bytes themselves without the value: the
console streams a run's large input or output from here instead of inlining it in the run's
JSON. A blob is deleted with its run (``Retention``); one whose run id has no run is deleted
on its own by cleanup, once it is older than the world's orphan grace
(``wayline.world.blobs.ORPHAN_GRACE_SECONDS``).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ...errors import BlobMissingError

if TYPE_CHECKING:
    from ..._core.events import Event
    from ..._core.projections import RunInfo

PayloadField = Literal["input", "output"]
"""The run payloads a run view holds: what started it, and what it ended with."""

CHUNK_BYTES = 64 * 1024
"""How many bytes :meth:`Blobs.blob_chunks` yields at a time: small enough for one HTTP chunk
to leave at once, large enough that a 64 MiB blob is a thousand of them, not a million."""


@dataclass(frozen=True)
class BlobRef:
    """Where a blob is: its sha256 ``digest`` (hex), its ``size`` in bytes, the
    incarnation of the run id it was stored for (None: named by run and digest alone), and
    the event of the run's log that refers to it (0: none, a blob put through this port).
    Equal references name the same blob whatever their ``seq``."""

    digest: str
    size: int
    incarnation: str | None = None
    seq: int = field(default=0, compare=False)


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Blobs:
    """What a world offers for out-of-line payloads (see the module docstring)."""

    async def put_blob(self, run_id: str, data: bytes) -> BlobRef:
        """Store ``data`` for the run; a put of the same bytes again is a no-op and gives the
        same reference."""
        raise NotImplementedError(f"{type(self).__name__} does not store blobs")

    async def get_blob(self, run_id: str, ref: BlobRef) -> bytes | None:
        """The blob's bytes, or None when the store holds none under ``ref``."""
        raise NotImplementedError(f"{type(self).__name__} does not store blobs")

    async def blob_chunks(
        self, run_id: str, ref: BlobRef, chunk_bytes: int = CHUNK_BYTES
    ) -> AsyncIterator[bytes]:
        """The blob's bytes, ``chunk_bytes`` at a time. Raises :class:`BlobMissingError`
        (naming the event that refers to it) before the first chunk when the store holds no
        blob under ``ref``, or holds bytes that do not hash to its digest."""
        data = await self.get_blob(run_id, ref)
        store = type(self).__name__
        if data is None:
            raise BlobMissingError(run_id, ref.seq, f"no blob {ref.digest}", store=store)
        if digest_of(data) != ref.digest:
            raise BlobMissingError(
                run_id, ref.seq, f"blob {ref.digest} holds other bytes", store=store
            )
        for start in range(0, len(data), chunk_bytes):
            yield data[start : start + chunk_bytes]

    async def payload_blob(self, run_id: str, which: PayloadField) -> BlobRef | None:
        """The blob the run's input or output (``which``) is stored in; None when it is
        inline (small, or a world that keeps every payload inline) or there is no such run."""
        return None

    async def stored_run(self, run_id: str) -> RunInfo | None:
        """The run's view as stored: an input or output kept out of line is still its
        reference (``{"$wayline.blob": digest, "bytes": n}``, ``wayline.world.blobs``), so a
        reader that wants its size or a link, not its value, reads none of its bytes. A world
        that keeps every payload inline gives its ``get_run``."""
        raise NotImplementedError(f"{type(self).__name__} does not store blobs")

    async def stored_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """The run's events after ``after_seq`` as stored: a payload kept out of line is
        still its reference, as in :meth:`stored_run`. A log that does not read raises
        ``CorruptLogError`` as ``list_events`` does."""
        raise NotImplementedError(f"{type(self).__name__} does not store blobs")


async def prepended(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``first`` (when not empty), then ``rest``: a stream whose first chunk was read ahead,
    to raise a missing blob's error before a response starts."""
    if first:
        yield first
    async for chunk in rest:
        yield chunk
