"""What the SQLite query-plan tests share: the statements a world really runs, traced on its
connection, and the plan SQLite makes for one of them (``EXPLAIN QUERY PLAN``, read through a
connection of its own on the same file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wayline.worlds.local import LocalWorld


@contextmanager
def traced(world: LocalWorld) -> Iterator[list[str]]:
    """The statements ``world`` runs on its connection while the block runs, in order."""
    statements: list[str] = []
    world._conn().set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        world._conn().set_trace_callback(None)


def query_plan(db: Path, sql: str) -> str:
    """SQLite's plan of ``sql`` on the file ``db``, its lines joined with `` | ``."""
    reader = sqlite3.connect(db)
    try:
        return " | ".join(row[3] for row in reader.execute(f"EXPLAIN QUERY PLAN {sql}"))
    finally:
        reader.close()


def page_read_plan(db: Path, statements: list[str], table: str) -> str:
    """The plan of the one traced statement that reads a page (a ``LIMIT``) from ``table``."""
    reads = [sql for sql in statements if f"FROM {table}" in sql and "LIMIT" in sql]
    assert len(reads) == 1, statements
    return query_plan(db, reads[0])
