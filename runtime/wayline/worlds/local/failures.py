"""What a failed SQLite call means, as the Wayline error the runtime handles.

Every failure of the file itself is a :class:`WorldUnavailableError` naming the file: the
worker tries again, and the next call may succeed. A full filesystem is told apart
(:class:`WorldStorageFullError`, ``STORE_FULL``) because its cure is an operator's (free
space), not time: SQLite answers ``SQLITE_FULL`` ("database or disk is full") when a write of
its file or of its write-ahead log meets ``ENOSPC``, and ``SQLITE_IOERR`` when another of its
writes does (the shared-memory index growing, a journal truncated), so an I/O error on a
filesystem with no free block left is counted as full too.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from ...errors import WorldStorageFullError, WorldUnavailableError

_SQLITE_FULL = 13
_SQLITE_IOERR = 10
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def unavailable(path: Path, err: BaseException, busy_timeout: float) -> WorldUnavailableError:
    """``err``, raised by a call on the database at ``path``, as a Wayline error."""
    text = str(err)
    if _is_full(path, err):
        return WorldStorageFullError(
            f"database file {path} cannot be written: its filesystem is full ({text}); "
            "nothing of the refused write was stored, and the call succeeds again once space "
            "is freed",
            path=str(path),
        )
    if "locked" in text or "busy" in text:
        why = f"is locked by another process (waited {busy_timeout:g}s)"
    elif isinstance(err, sqlite3.DatabaseError) and "not a database" in text:
        why = "is not a SQLite database"
    else:
        why = f"cannot be opened or written ({text})"
    return WorldUnavailableError(f"database file {path} {why}", path=str(path))


def _is_full(path: Path, err: BaseException) -> bool:
    if isinstance(err, OSError):
        return err.errno in _NO_SPACE
    code = getattr(err, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return "database or disk is full" in str(err)
    if code & 0xFF == _SQLITE_FULL:
        return True
    return code & 0xFF == _SQLITE_IOERR and _no_free_block(path)


def _no_free_block(path: Path) -> bool:
    """Whether the filesystem holding ``path`` has no block left for an unprivileged writer
    (``f_bavail``; root's reserve does not count, as SQLite may not run as root)."""
    try:
        return os.statvfs(path.parent if str(path.parent) else ".").f_bavail == 0
    except OSError:
        return False


def rollback(db: sqlite3.Connection) -> None:
    """End a failed transaction, if SQLite has not ended it already: on ``SQLITE_FULL`` or an
    I/O error it may roll the whole transaction back itself, and a ``ROLLBACK`` then would
    fail ("no transaction is active") and hide the error that matters, which the caller
    raises. Nothing of an uncommitted transaction is stored whatever the rollback answers."""
    if not db.in_transaction:
        return
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass
