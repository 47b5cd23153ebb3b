"""The SQLite world's rows: reading them back checked, writing the run view, and repair.

Rows are read as untrusted (see ``worlds/entries.py``): a ``runs`` row or an ``events`` row
that does not decode raises :class:`CorruptLogError`, and a row past the run's ``last_seq``
(an append behind the world's back), or rows that end before it (deleted behind its back), are
seen without reading the log.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..._core import jsoncodec, search_attributes
from ..._core.events import HOOK_ACTIVE, Event, NewEvent, RunStatus, apply_transition
from ...errors import CorruptLogError, RunNotFoundError
from ...world import RunInfo, entries, fold_run
from . import attribute_index

EVENTS_TABLE = "events table"
STORED_STATUSES = frozenset(s.value for s in RunStatus if s is not RunStatus.CORRUPT)


def loads(text: str | None) -> Any:
    return None if text is None else entries.loads(text)


def run_head(run_id: str, row: Sequence[Any] | None) -> tuple[RunStatus | None, int]:
    if row is None:
        return None, 0
    if row[0] not in STORED_STATUSES or not isinstance(row[1], int) or isinstance(row[1], bool):
        raise CorruptLogError(
            run_id,
            0,
            "its status or last seq is not one Wayline writes",
            store="runs table",
            drop=False,
        )
    return RunStatus(row[0]), row[1]


RUN_SELECT = "runs.*, (SELECT MAX(seq) FROM events WHERE events.run_id = runs.run_id)"
"""A run's row and its highest stored event: a primary-key lookup that shows a row written
behind the world's back (past ``last_seq``) without reading the log."""


def run_from_row(row: Sequence[Any]) -> RunInfo:
    (run_id, workflow, status, inp, out, err, attrs, created, started, ended, updated, last) = row[
        :12
    ]
    top = row[12] if len(row) > 12 else last
    if isinstance(last, int) and isinstance(top, int) and top > last:
        raise CorruptLogError(
            str(run_id),
            last + 1,
            "a row the world did not write, past the run's last seq",
            store=EVENTS_TABLE,
        )
    if isinstance(top, int):  # the rows end early: the run's last row deleted, say
        check_end(str(run_id), top, last)
    try:
        if not isinstance(run_id, str) or not isinstance(workflow, str):
            raise entries.Unreadable("its id or workflow is not text")
        run_head(str(run_id), (status, last))
        error, attributes = loads(err), loads(attrs) or {}
        if error is not None and not isinstance(error, dict):
            raise entries.Unreadable("its error is not an object")
        if not isinstance(attributes, dict):
            raise entries.Unreadable("its attributes are not an object")
        times = (created, started, ended, updated)
        if not all(t is None or isinstance(t, int | float) for t in times):
            raise entries.Unreadable("a timestamp is not a number")
        return RunInfo(
            run_id=run_id,
            workflow=workflow,
            status=RunStatus(status),
            input=loads(inp),
            output=loads(out),
            error=error,
            attributes=attributes,
            created_at=created,
            started_at=started,
            ended_at=ended,
            updated_at=updated,
            last_seq=last,
        )
    except entries.Unreadable as why:
        raise CorruptLogError(str(run_id), 0, str(why), store="runs table", drop=False) from None


def events_from_rows(
    run_id: str, rows: Sequence[Sequence[Any]], after: int, last_seq: int
) -> list[Event]:
    """Stored rows as events, each checked: dense from ``after + 1``, none past the run's
    ``last_seq`` (only a writer behind the world's back puts one there)."""
    out: list[Event] = []
    expected = after + 1
    for seq, type_, cid, data, created in rows:
        try:
            if seq != expected:
                raise entries.Unreadable(f"seq {seq} where {expected} was expected")
            if seq > last_seq:
                raise entries.Unreadable(f"past the run's last seq {last_seq}")
            if not isinstance(data, str | bytes):
                raise entries.Unreadable("its data is not text")
            if not isinstance(created, int | float):
                raise entries.Unreadable("its timestamp is not a number")
            out.append(entries.event(run_id, seq, type_, cid, entries.loads(data), created))
        except entries.Unreadable as why:
            raise CorruptLogError(run_id, int(expected), str(why), store=EVENTS_TABLE) from None
        expected += 1
    return out


def check_end(run_id: str, seen: int, last_seq: Any) -> None:
    """Fence a log whose rows end at ``seen``, before the run's ``last_seq``: every append
    writes its rows and moves ``last_seq`` in one transaction, so the rows after ``seen`` were
    deleted behind the world's back. Named as a gap in the rows is (the first missing entry,
    which ``repair --drop-seq`` closes). ``seen`` and ``last_seq`` must come from one read
    snapshot: read apart, an append committed in between looks like missing rows."""
    if isinstance(last_seq, int) and not isinstance(last_seq, bool) and seen < last_seq:
        raise CorruptLogError(
            run_id,
            seen + 1,
            f"no row where {seen + 1} was expected, up to the run's last seq {last_seq}",
            store=EVENTS_TABLE,
        )


LIVE_HOOK = (
    "SELECT 1 FROM entities e JOIN runs r ON r.run_id = e.run_id WHERE e.run_id = ? "
    "AND e.cid = ? AND e.status = ? AND r.status NOT IN ('completed', 'failed', 'cancelled')"
)
"""Whether a hook-table row's hook is open in its run's log (run id, cid, HOOK_ACTIVE)."""


def free_stale_token(db: sqlite3.Connection, token: str) -> str | None:
    """Deactivate the row holding ``token`` when it is not a live hook (its run is missing or
    ended, or its log never created that hook): a row written behind the world's back must
    not lock a token forever. None when the token is now free, else the run holding it."""
    row = db.execute(
        "SELECT run_id, cid FROM hooks WHERE token = ? AND active = 1", (token,)
    ).fetchone()
    if row is None:
        return None
    run_id, cid = row
    run = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    live = run is not None and run[0] in STORED_STATUSES and not RunStatus(run[0]).terminal
    if live:
        ent = db.execute(
            "SELECT status FROM entities WHERE run_id = ? AND cid = ?", (run_id, cid)
        ).fetchone()
        live = ent is not None and ent[0] == HOOK_ACTIVE
    if live:
        return str(run_id)
    db.execute("UPDATE hooks SET active = 0 WHERE token = ? AND active = 1", (token,))
    return None


def rebuild_run(db: sqlite3.Connection, run_id: str, events: list[Event]) -> None:
    """The run's row and entity statuses, folded again from its (checked) events."""
    info: RunInfo | None = None
    entity: dict[str, str | None] = {}
    status: RunStatus | None = None
    for ev in events:
        cid = ev.correlation_id
        status, after = apply_transition(
            status,
            entity.get(cid) if cid else None,
            NewEvent(ev.type, cid, ev.data),
            info.error if info is not None else None,  # while blocked: the block's data
        )
        if cid is not None:
            entity[cid] = after
        info = fold_run(info, ev)
    assert info is not None
    db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM entities WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM run_attributes WHERE run_id = ?", (run_id,))
    insert_run(db, replace(info, status=RunStatus.PENDING))
    changes: dict[str, Any] = {
        "status": info.status,
        "last_seq": info.last_seq,
        "updated_at": info.updated_at,
        "started_at": info.started_at,
        "ended_at": info.ended_at,
        "output": info.output,
        "error": info.error,
    }
    update_run(db, run_id, {k: v for k, v in changes.items() if v is not None})
    for cid, st in entity.items():
        if st is not None:
            db.execute(
                "INSERT INTO entities (run_id, cid, status) VALUES (?,?,?)", (run_id, cid, st)
            )
    # the run's hook rows follow its log: none for a hook the log does not hold
    db.execute(
        "DELETE FROM hooks WHERE run_id = ? AND cid NOT IN "
        "(SELECT cid FROM entities WHERE run_id = ?)",
        (run_id, run_id),
    )
    if info.status.terminal:
        db.execute("UPDATE hooks SET active = 0 WHERE run_id = ?", (run_id,))


RUN_COLUMNS: dict[str, Callable[[Any], Any]] = {
    "status": str,
    "last_seq": int,
    "updated_at": float,
    "started_at": float,
    "ended_at": lambda v: None if v is None else float(v),  # None: a redrive reopened it
    "output": jsoncodec.dumps_text,
    "error": jsoncodec.dumps_text,
    "input": jsoncodec.dumps_text,
}


def update_run(db: sqlite3.Connection, run_id: str, changes: dict[str, Any]) -> None:
    cols = [c for c in RUN_COLUMNS if c in changes]
    db.execute(
        f"UPDATE runs SET {', '.join(f'{c} = ?' for c in cols)} WHERE run_id = ?",
        [RUN_COLUMNS[c](changes[c]) for c in cols] + [run_id],
    )


def insert_run(db: sqlite3.Connection, info: RunInfo) -> None:
    db.execute(
        "INSERT INTO runs (run_id, workflow, status, input, output, error, attributes, "
        "created_at, started_at, ended_at, updated_at, last_seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            info.run_id,
            info.workflow,
            str(info.status),
            jsoncodec.dumps_text(info.input),
            None,
            None,
            json.dumps(dict(info.attributes)),
            info.created_at,
            None,
            None,
            info.updated_at,
            info.last_seq,
        ),
    )
    attribute_index.index(db, info.run_id, search_attributes.stored(info.attributes))


def read_log(run_id: str, rows: Sequence[Sequence[Any]], last_seq: int) -> list[Event]:
    """A run's whole log from its rows, as every reader takes it: each row decoded and
    following from the ones before it, up to the run's ``last_seq`` (``check_end``). Raises
    the :class:`CorruptLogError` of the first entry that fails (the one ``repair --drop-seq``
    removes, or closes when it is missing)."""
    try:
        events = events_from_rows(run_id, rows, 0, last_seq)
    except CorruptLogError as bad:
        # an entry before the one that does not decode may already not follow: it fails first
        before = events_from_rows(run_id, rows[: bad.seq - 1], 0, last_seq)
        entries.check_log(run_id, before, store=EVENTS_TABLE)
        raise
    entries.check_log(run_id, events, store=EVENTS_TABLE)
    check_end(run_id, len(events), last_seq)
    return events


def log_rows(db: sqlite3.Connection, run_id: str) -> list[Any]:
    """Every stored row of the run's log, in order; none is no run."""
    rows = db.execute(
        "SELECT seq, type, cid, data, created_at FROM events WHERE run_id = ? ORDER BY seq",
        (run_id,),
    ).fetchall()
    if not rows:
        raise RunNotFoundError(f"no run {run_id}")
    return rows


def _remove(db: sqlite3.Connection, run_id: str, drop_seq: int, last: int) -> tuple[str, int]:
    """Take entry ``drop_seq`` (the first that does not read) out of the run's rows: what was
    done, and how far the later rows moved down to keep the log dense."""
    gone = db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run_id, drop_seq))
    what, shift = f"removed event {drop_seq}", 1
    if gone.rowcount != 1:  # no row there: the next one is not where the log expects it
        (after,) = db.execute(
            "SELECT MIN(seq) FROM events WHERE run_id = ? AND seq > ?", (run_id, drop_seq)
        ).fetchone()
        if after is None and drop_seq <= last:  # the rows end early: nothing to move down
            shift = last - drop_seq + 1
            return f"closed the gap of {shift} deleted event(s) at {drop_seq}, the log's end", shift
        if after is None:
            raise RunNotFoundError(f"run {run_id} has no event {drop_seq}")
        if after > last:  # past the run's end: a row appended behind the world's back
            db.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", (run_id, after))
            return f"removed event {after}, past the run's last event {last}", 0
        # a gap: rows deleted behind the world's back; closing it is all that is left to do
        shift = after - drop_seq
        what = f"closed the gap of {shift} deleted event(s) at {drop_seq}"
    # two steps, so the primary key never sees two rows with one seq (only the rows moved
    # here are negative in between)
    db.execute("UPDATE events SET seq = -seq WHERE run_id = ? AND seq > ?", (run_id, drop_seq))
    db.execute(
        "UPDATE events SET seq = -seq - ? WHERE run_id = ? AND seq < ?",
        (shift, run_id, -drop_seq),
    )
    return what, shift


def _has_rows(db: sqlite3.Connection, run_id: str) -> bool:
    return (
        db.execute("SELECT 1 FROM events WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
        is not None
    )


def _forget(db: sqlite3.Connection, run_id: str, drop_seq: int | None, last: Any) -> list[str]:
    """A run's row that outlived every row of its log (deleted behind the world's back): with
    ``--drop-seq 1`` (what its fence advises) the run goes too, as on NATS a run without
    messages does not exist; without it, the fence is raised. A parent that claimed it as its
    child starts it again from the claim."""
    missing = CorruptLogError(
        run_id,
        1,
        f"no row where 1 was expected, up to the run's last seq {last}",
        store=EVENTS_TABLE,
    )
    if drop_seq is None:
        raise missing
    entries.check_drop(run_id, drop_seq, missing)
    for table in ("runs", "entities", "hooks"):
        db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))  # names fixed above
    return ["removed the run: none of its events is left"]


def repair_tx(
    db: sqlite3.Connection, run_id: str, drop_seq: int | None
) -> tuple[list[str], CorruptLogError | None]:
    """``LocalWorld.repair_run`` in one transaction (see there): what was done, and the
    error of the next bad entry when the log still does not read after ``drop_seq`` went."""
    done: list[str] = []
    head = db.execute("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if head is not None and not _has_rows(db, run_id):
        return _forget(db, run_id, drop_seq, head[0]), None
    rows = log_rows(db, run_id)
    # a run's row that cannot say where its log ends does not fence the events after it
    stored = head[0] if head is not None and isinstance(head[0], int) else None
    # without --drop-seq the rows the log holds are rebuilt into the run's row, but rows
    # missing before the end it records fence (as a gap does): rebuilding would drop them
    last = max(len(rows), stored or 0)
    if drop_seq is not None:
        last = len(rows) if stored is None else stored
        bad: CorruptLogError | None = None
        try:
            read_log(run_id, rows, last)
        except CorruptLogError as err:
            bad = err
        entries.check_drop(run_id, drop_seq, bad)
        what, shift = _remove(db, run_id, drop_seq, last)
        done.append(what)
        if drop_seq <= last:  # rows past the run's end (appended behind its back) stay past it
            last -= shift
        rows = log_rows(db, run_id)
    try:
        events = read_log(run_id, rows, last)
    except CorruptLogError as err:
        if drop_seq is None:
            raise
        # the removal stands (as on NATS): the next repair removes the entry this names. The
        # run's row ends where the rows now do, or the rows it moved down would read as missing
        if stored is not None:
            db.execute("UPDATE runs SET last_seq = ? WHERE run_id = ?", (last, run_id))
        return done, err
    rebuild_run(db, run_id, events)
    done.append(f"rebuilt the run from its {len(events)} events")
    return done, None
