"""The embedded world's search attribute index: a row per (run, attribute value) in
``run_attributes``, written in the transaction of the append that sets the values (the
``run_created`` or the ``attributes_set``), so the index never disagrees with the log.

A query is one SELECT on ``runs`` whose every ``where`` is a ``run_id IN (...)`` over the
index's ``(key, text)`` or ``(key, kind, num)`` index: SQLite drives it from the index rows
of one expression, not from a scan of the runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ..._core import search_attributes
from ..._core.search_attributes import Where

SCHEMA = """
CREATE TABLE IF NOT EXISTS run_attributes (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    num REAL,
    text TEXT
);
CREATE INDEX IF NOT EXISTS run_attributes_text ON run_attributes (key, text)
    WHERE text IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_num ON run_attributes (key, kind, num)
    WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_run ON run_attributes (run_id, key);
"""


def index(db: sqlite3.Connection, run_id: str, values: Mapping[str, Any]) -> None:
    """Replace the index rows of the attributes named in ``values`` (None: removed)."""
    if not values:
        return
    names = list(values)
    db.execute(
        f"DELETE FROM run_attributes WHERE run_id = ? AND key IN ({','.join('?' * len(names))})",
        [run_id, *names],
    )
    rows = [
        (run_id, name, kind, num, text)
        for name, value in values.items()
        if value is not None
        for kind, num, text in search_attributes.index_rows(value)
    ]
    if rows:
        db.executemany(
            "INSERT INTO run_attributes (run_id, key, kind, num, text) VALUES (?,?,?,?,?)", rows
        )


def set_attributes(db: sqlite3.Connection, run_id: str, update: Mapping[str, Any]) -> None:
    """An ``attributes_set``: the run row's copy merged, and the index rows of its keys."""
    row = db.execute("SELECT attributes FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    try:
        attributes = json.loads(row[0]) if row is not None and row[0] else {}
    except ValueError:
        attributes = {}
    if not isinstance(attributes, dict):
        attributes = {}
    current = search_attributes.stored(attributes)
    attributes[search_attributes.SEARCH_KEY] = search_attributes.merged(current, update)
    db.execute("UPDATE runs SET attributes = ? WHERE run_id = ?", (json.dumps(attributes), run_id))
    index(db, run_id, update)


_COLUMN = {"str": "text", "num": "num", "bool": "num", "time": "num"}


def clauses(where: Sequence[Where]) -> tuple[str, list[Any]]:
    """The SQL (``AND ...`` terms on ``runs``) and parameters of ``where``."""
    sql, params = "", list[Any]()
    for w in where:
        column = _COLUMN[w.kind]
        value = w.text if w.kind == "str" else w.num
        kind = "" if column == "text" else " AND kind = ?"
        kinds = [] if column == "text" else [w.kind]
        op = "=" if w.op == "!=" else w.op
        hit = f"SELECT run_id FROM run_attributes WHERE key = ?{kind} AND {column} {op} ?"
        if w.op == "!=":
            sql += (
                " AND run_id IN (SELECT run_id FROM run_attributes WHERE key = ?)"
                f" AND run_id NOT IN ({hit})"
            )
            params += [w.key, w.key, *kinds, value]
        else:
            sql += f" AND run_id IN ({hit})"
            params += [w.key, *kinds, value]
    return sql, params
