"""Out-of-line payloads on SQLite: the ``blobs`` table (see ``wayline.world.blobs``).

A blob is written in a transaction of its own before the append that names it, so a batch's
transaction stays short; a crash in between leaves a row no event names, removed with its run
by cleanup (rows are keyed by run), or, when the run was never created, by the cleanup after
the orphan grace (:func:`drop_orphans`). Archive moves a run's rows to ``blobs_archive``.

No incarnation is named here (``wayline.world.blobs``): the ``blobs`` table holds only the live
run of each id (archive moves an ended run's rows out, in the transaction that moves its
events), so a run id started again after its archive writes rows of its own, and its cleanup
deletes from ``blobs`` alone, never from ``blobs_archive``.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from ..._core import clock

BLOBS_TABLE = "blobs table"


class LocalBlobs:
    name = BLOBS_TABLE

    def __init__(
        self,
        write: Callable[..., Any],
        read: Callable[[str, Sequence[Any]], list[Any]],
    ) -> None:
        self._write = write
        self._read = read

    async def put(
        self, run_id: str, digest: str, data: bytes, *, incarnation: str | None = None
    ) -> None:
        def tx(db: sqlite3.Connection) -> None:
            # A start retried with the same input puts the same blob again: its time must move
            # on, or orphan cleanup could take the older put's time for the retry's and delete
            # the blob between the retry's put and its append.
            db.execute(
                "INSERT INTO blobs (run_id, digest, data, created_at) VALUES (?,?,?,?) "
                "ON CONFLICT (run_id, digest) DO UPDATE SET created_at = excluded.created_at",
                (run_id, digest, data, clock.now()),
            )

        self._write(tx)

    async def get(
        self, run_id: str, digest: str, *, incarnation: str | None = None
    ) -> bytes | None:
        rows = self._read(
            "SELECT data FROM blobs WHERE run_id = ? AND digest = ? UNION ALL "
            "SELECT data FROM blobs_archive WHERE run_id = ? AND digest = ? LIMIT 1",
            (run_id, digest, run_id, digest),
        )
        if not rows or not isinstance(rows[0][0], bytes):
            return None
        return bytes(rows[0][0])


def archive_blobs(db: sqlite3.Connection, ids: list[str]) -> None:
    """Inside an archive transaction: the runs' blobs go with their events."""
    marks = ",".join("?" * len(ids))
    db.execute(
        f"INSERT OR IGNORE INTO blobs_archive SELECT * FROM blobs WHERE run_id IN ({marks})", ids
    )


def drop_orphans(db: sqlite3.Connection, stored_by: float) -> None:
    """Delete the blobs stored by ``stored_by`` whose run id has no run (``blobs`` holds only
    live runs' rows: archive moves an ended run's out): a start whose process died between its
    blob's transaction and its append's, or whose append was refused, left them, and no event
    will name them (``wayline.world.blobs.ORPHAN_GRACE_SECONDS``)."""
    db.execute(
        "DELETE FROM blobs WHERE created_at <= ? "
        "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.run_id = blobs.run_id)",
        (stored_by,),
    )


def stream_blob(
    path: Path, run_id: str, digest: str, chunk_bytes: int, busy_timeout: float
) -> Generator[bytes, None, None]:
    """The blob's bytes, ``chunk_bytes`` at a time, read incrementally (``blobopen``) on a
    read-only connection of its own, so a 64 MiB blob is never held whole and the world's own
    connection is not held in a read while a slow reader takes the chunks; nothing when the
    blob is not stored. Raises :class:`LookupError` once the bytes read do not hash to
    ``digest`` (the row was replaced or removed under the read): what was yielded then is not
    the blob. A blob of an archived run is read from ``blobs_archive``, as
    :meth:`LocalBlobs.get` does.

    Each chunk is read in a read transaction of its own, closed before the chunk is yielded:
    the generator waits on a slow HTTP client between chunks, and a read transaction open over
    that wait would keep every later commit in the WAL (no checkpoint can pass it), so a
    stalled reader would grow the WAL without bound.
    """
    # as_uri() quotes the path: a '#', '?' or '%' in it would otherwise end or alter the URI.
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout)
    try:
        for table in ("blobs", "blobs_archive"):
            rows = db.execute(
                f"SELECT rowid FROM {table} WHERE run_id = ? AND digest = ?", (run_id, digest)
            ).fetchall()
            if rows:
                break
        else:
            return
        rowid, sha, offset, size = rows[0][0], hashlib.sha256(), 0, None
        while size is None or offset < size:
            try:
                with db.blobopen(table, "data", rowid, readonly=True) as blob:
                    if size is None:
                        size = len(blob)
                    elif len(blob) != size:
                        raise LookupError(f"blob {digest} holds other bytes")
                    blob.seek(offset)
                    chunk = blob.read(chunk_bytes)
            except sqlite3.OperationalError as err:
                # The row was deleted between two chunks (blobopen finds no such rowid), or
                # the database is unavailable, which the caller reports as such.
                if db.execute(f"SELECT 1 FROM {table} WHERE rowid = ?", (rowid,)).fetchall():
                    raise
                raise LookupError(f"blob {digest} was removed during the read") from err
            if not chunk:
                break
            offset += len(chunk)
            sha.update(chunk)
            yield chunk
        if sha.hexdigest() != digest:
            raise LookupError(f"blob {digest} holds other bytes")
    finally:
        db.close()
