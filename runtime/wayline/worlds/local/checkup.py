"""``wayline doctor`` on a SQLite world, and the sync mode a starting worker checks.

``PRAGMA synchronous`` is a setting of each connection, not of the file: what a world's writes
get is its own URL's ``sync=`` (``full`` unless it says ``normal``), so that is what is
reported; the file is opened read-only only to see that it is a database in WAL mode.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ...world.checkup import Finding, lazy_sync_warning


def sync_warning(path: Path, synchronous: str) -> str | None:
    """One line when commits to ``path`` skip the fsync (``sync=normal``), else None."""
    if synchronous == "FULL":
        return None
    return lazy_sync_warning(
        f"the SQLite world {path}",
        "sync=normal, synchronous=NORMAL",
        "an OS crash or power loss can lose its last commits; drop ?sync=normal to fsync each "
        "commit",
    )


def checkup(path: Path, synchronous: str) -> list[Finding]:
    out = [_database(path)]
    line = sync_warning(path, synchronous)
    if line is None:
        out.append(Finding("sync", "ok", "synchronous=FULL (each commit is fsynced first)"))
    else:
        out.append(Finding("sync", "warn", line))
    return out


def _database(path: Path) -> Finding:
    if not path.exists():
        return Finding(
            "database",
            "warn",
            f"no database at {path} yet: a worker, `wayline start` or `wayline run` creates it",
        )
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            mode = str(db.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error as err:
        return Finding("database", "fail", f"cannot read {path}: {err}")
    if mode.lower() != "wal":
        return Finding(
            "database",
            "warn",
            f"{path}: journal_mode {mode}, not wal (not written by a Wayline world yet?)",
        )
    return Finding("database", "ok", f"{path}: journal_mode wal")
