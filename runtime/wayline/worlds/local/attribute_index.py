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
DROP INDEX IF EXISTS run_attributes_text;
DROP INDEX IF EXISTS run_attributes_num;
CREATE INDEX IF NOT EXISTS run_attributes_text_run ON run_attributes (key, text, run_id)
    WHERE text IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_num_run ON run_attributes (key, kind, num, run_id)
    WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_run ON run_attributes (run_id, key);
CREATE INDEX IF NOT EXISTS runs_listed ON runs (run_id, created_at, status, workflow);
"""
"""The value indexes end with ``run_id`` and ``runs_listed`` holds what a filtered list sorts
and filters on, so that a query (``query``) names its runs and orders them from indexes alone,
without a table row; only the page's own rows are then read (``LocalEventLog._run_rows``). The
value indexes without ``run_id`` that came before are dropped: these cover what they did."""


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


def _hit(w: Where, alias: str, by_run: bool = False) -> tuple[str, list[Any]]:
    """The index rows of ``alias`` that satisfy ``w`` (``!=``: that equal its value). With
    ``by_run`` the value columns are written ``+col``, which SQLite takes as "use no index
    on it": a per-run check then looks the run's rows up by ``(run_id, key)`` instead of
    walking the value index (for ``amount>500``, half of it) once per candidate."""
    column = _COLUMN[w.kind]
    value = w.text if w.kind == "str" else w.num
    op = "=" if w.op == "!=" else w.op
    plus = "+" if by_run else ""
    if column == "text":
        return f"{alias}.key = ? AND {plus}{alias}.text {op} ?", [w.key, value]
    return (
        f"{alias}.key = ? AND {plus}{alias}.kind = ? AND {plus}{alias}.num {op} ?",
        [w.key, w.kind, value],
    )


def query(where: Sequence[Where], select: str) -> tuple[str, list[Any]]:
    """``SELECT select FROM runs`` narrowed to the runs that satisfy every expression, driven
    from the index rows of one of them: the first ``=`` (the most selective kind), else the
    first order comparison, else the runs holding the first ``!=``'s key. The rest are
    checked per candidate through the ``(run_id, key)`` index. CROSS JOIN keeps SQLite from
    driving from the runs table instead (its plan for an IN list scanned every run of the
    status, and filled the list of a wide order comparison). ``runs_listed`` is named because
    SQLite otherwise looks each run up by its primary key and reads its row, where that index
    holds every column a filtered list or count reads: ``select`` takes only those."""
    drive = next((w for w in where if w.op == "="), None)
    drive = drive or next((w for w in where if w.op != "!="), None)
    if drive is not None:
        cond, params = _hit(drive, "d")
    else:
        cond, params = "d.key = ?", [where[0].key]
    sql = (
        f"SELECT {select} FROM (SELECT DISTINCT d.run_id FROM run_attributes d WHERE {cond}) "
        "AS hit CROSS JOIN runs INDEXED BY runs_listed ON runs.run_id = hit.run_id WHERE 1=1"
    )
    for w in where:
        if w is drive:
            continue
        cond, more = _hit(w, "a", by_run=True)
        each = "SELECT 1 FROM run_attributes a WHERE a.run_id = runs.run_id AND "
        if w.op == "!=":
            sql += f" AND EXISTS ({each}a.key = ?) AND NOT EXISTS ({each}{cond})"
            params += [w.key, *more]
        else:
            sql += f" AND EXISTS ({each}{cond})"
            params += more
    return sql, params
