"""One append to the embedded world's log: planned in Python, then written in a few statements.

A plan validates the whole append (expected seq, every transition, the JSON of every event)
before anything is written, so a bad append fails alone and writes nothing. It starts from a
:class:`Head`: what this process last wrote to the run (its stored status and last seq, and
the status of every entity). A head from the cache is not re-read: the ``runs`` row is
updated only ``WHERE last_seq = ? AND status = ?`` of that head, and the events go in at the
seqs after it, so a writer in another process that moved the run in between is seen (a taken
seq, or no row updated) and the append is planned again from a head read in the transaction.
A typed error is only ever raised from a head read in the transaction.

The common step is four statements: the events (one multi-row INSERT), the ``runs`` row, the
entity statuses (one multi-row upsert) and, once per transaction for all its runs, the change
feed. Appends that create hooks, or that are larger than one INSERT, write under a SAVEPOINT
so that an error part-way (a hook token held by another run) takes back only their own rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._core import jsoncodec
from ..._core.events import (
    HOOK_ACTIVE,
    RUN_TERMINAL_EVENTS,
    Event,
    EventType,
    NewEvent,
    RunStatus,
    apply_transition,
    stamped,
)
from ..._core.projections import AttributesSet, payload
from ...errors import CorruptLogError, HookTokenConflictError, SequenceConflictError
from ...world import RunInfo, new_run, pinned_definition, run_changes
from . import attribute_index
from .rows import EVENTS_TABLE, RUN_COLUMNS, free_stale_token, insert_run, run_head

ROWS_PER_INSERT = 150
"""Rows per multi-row INSERT: 6 parameters a row stays under SQLite's oldest limit (999)."""


@dataclass(slots=True)
class Head:
    """A run as of ``last_seq``: its stored status (None: no such run) and the status of every
    entity it has (complete: a correlation id that is not here has no entity)."""

    last_seq: int
    status: RunStatus | None
    entities: dict[str, str]
    block: dict[str, Any] | None = None
    """While the run is blocked: the block's data (its row's error), which records the status
    it returns to when lifted (``events.stamped``)."""


@dataclass(slots=True)
class Plan:
    run_id: str
    head: Head
    events: list[Event] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    entities: list[tuple[str, str] | None] = field(default_factory=list)
    """Per event: the entity status it set, when it changed one."""
    created: RunInfo | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    status: RunStatus | None = None
    """The run's stored status after the append."""
    special: bool = False
    """Hook rows, an end or a pinned definition to write besides the events."""
    block: dict[str, Any] | None = None
    """The data of the block in force after the append (see ``Head.block``)."""
    hooks: bool = False
    """A hook is created: its token is judged against the hook rows event by event, and its
    rows are written under a SAVEPOINT (a token held elsewhere fails this append alone)."""


def read_head(db: sqlite3.Connection, run_id: str) -> Head:
    row = db.execute(
        "SELECT status, last_seq, error FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    status, last_seq = run_head(run_id, row)
    entities: dict[str, str] = {}
    if status is not None:
        entities = dict(
            db.execute("SELECT cid, status FROM entities WHERE run_id = ?", (run_id,)).fetchall()
        )
    block = _block(row[2]) if status is RunStatus.BLOCKED else None
    return Head(last_seq, status, entities, block)


def _block(error: Any) -> dict[str, Any] | None:
    try:
        found = json.loads(error) if isinstance(error, str) else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def plan(
    run_id: str, head: Head, events: Sequence[NewEvent], expected_seq: int | None, now: float
) -> Plan:
    """Validate the append against ``head`` and build its rows; nothing is written."""
    if expected_seq is not None and expected_seq != head.last_seq:
        raise SequenceConflictError(
            f"run {run_id} is at seq {head.last_seq}, writer expected {expected_seq}",
            last_seq=head.last_seq,
        )
    out = Plan(run_id, head, status=head.status, block=head.block)
    status, seq = head.status, head.last_seq
    changed: dict[str, str] = {}  # this append's entity statuses, over the head's (no copy)
    for new in events:
        new = stamped(new, status, out.block)
        cid = new.correlation_id
        before = None
        if cid is not None:
            before = changed[cid] if cid in changed else head.entities.get(cid)
        status, after = apply_transition(status, before, new, out.block, appending=True)
        if new.type is EventType.RUN_BLOCKED:
            out.block = dict(new.data)
        seq += 1
        event = Event(run_id, seq, new.type, cid, dict(new.data), now)
        out.rows.append((run_id, seq, str(new.type), cid, jsoncodec.dumps_text(event.data), now))
        step = None
        if cid is not None and after is not None and after != before:
            changed[cid] = after
            step = (cid, after)
        out.entities.append(step)
        if new.type is EventType.RUN_CREATED:
            out.created = new_run(event)
            out.status = out.created.status
        else:
            diff = run_changes(event)
            out.changes.update(diff)
            out.status = diff.get("status", out.status)
            if pinned_definition(event) is not None or new.type in _SPECIAL:
                out.special = True
                out.hooks = out.hooks or new.type is EventType.HOOK_CREATED
        out.events.append(event)
    return out


_SPECIAL = frozenset(
    {
        EventType.HOOK_CREATED,
        EventType.HOOK_DISPOSED,
        EventType.ATTRIBUTES_SET,
        *RUN_TERMINAL_EVENTS,
    }
)


def write(db: sqlite3.Connection, p: Plan, verified: bool) -> bool:
    """Write a plan inside the caller's transaction. False, with nothing of it written, when
    the head was not ``verified`` and the run moved (plan again from a read head). A typed
    error leaves nothing of this plan written either."""
    if not p.hooks and len(p.rows) <= ROWS_PER_INSERT:
        return _write(db, p, verified)
    db.execute("SAVEPOINT wayline_append")
    try:
        done = _write(db, p, verified)
    except BaseException:
        # on a full disk SQLite may have ended the whole transaction, savepoint and all: the
        # caller's rollback then finds nothing to undo, and the error raised is the disk's
        if db.in_transaction:
            db.execute("ROLLBACK TO wayline_append")
            db.execute("RELEASE wayline_append")
        raise
    if not done:
        db.execute("ROLLBACK TO wayline_append")
    db.execute("RELEASE wayline_append")
    return done


def _write(db: sqlite3.Connection, p: Plan, verified: bool) -> bool:
    if not _insert_events(db, p, verified):
        return False
    if p.created is not None:
        insert_run(db, p.created)
    if p.changes and not _update_run(db, p):
        if verified:  # we hold the write lock and read the row in this transaction
            raise CorruptLogError(
                p.run_id, 0, "its row changed during an append", store="runs table", drop=False
            )
        if p.rows:  # ours: the INSERT above succeeded (one statement, not guarded)
            db.execute(
                "DELETE FROM events WHERE run_id = ? AND seq > ? AND seq <= ?",
                (p.run_id, p.head.last_seq, p.events[-1].seq),
            )
        return False
    if p.hooks:  # a token held by a hook this append disposes of is judged in log order
        for event, step in zip(p.events, p.entities, strict=True):
            if step is not None:
                _upsert_entities(db, p.run_id, [step])
            _side_effects(db, event)
        return True
    final = dict(s for s in p.entities if s is not None)
    if final:
        _upsert_entities(db, p.run_id, list(final.items()))
    if p.special:
        for event in p.events:
            if event.type not in RUN_TERMINAL_EVENTS or _had_hooks(p):
                _side_effects(db, event)
    return True


def _had_hooks(p: Plan) -> bool:
    """Whether the run may hold an active hook row: this world writes a hook's row and its
    entity status together, so a run with no active hook entity has none to deactivate."""
    return HOOK_ACTIVE in p.head.entities.values() or any(
        s is not None and s[1] == HOOK_ACTIVE for s in p.entities
    )


def _insert_events(db: sqlite3.Connection, p: Plan, verified: bool) -> bool:
    for start in range(0, len(p.rows), ROWS_PER_INSERT):
        chunk = p.rows[start : start + ROWS_PER_INSERT]
        try:
            db.execute(
                "INSERT INTO events (run_id, seq, type, cid, data, created_at) VALUES "
                + ",".join(["(?,?,?,?,?,?)"] * len(chunk)),
                [v for row in chunk for v in row],
            )
        except sqlite3.IntegrityError:
            if not verified:  # another writer may have taken these seqs: read the run
                return False
            # only a row written behind the world's back holds a seq past the run's last
            taken = db.execute(
                "SELECT MIN(seq) FROM events WHERE run_id = ? AND seq > ?",
                (p.run_id, p.head.last_seq),
            ).fetchone()[0]
            raise CorruptLogError(
                p.run_id,
                int(taken),
                "a row the world did not write holds this seq",
                store=EVENTS_TABLE,
            ) from None
    return True


def _update_run(db: sqlite3.Connection, p: Plan) -> bool:
    """The run's row, only if it is still at the head the plan started from."""
    cols = [c for c in RUN_COLUMNS if c in p.changes]
    status: RunStatus | None
    if p.created is not None:
        last, status = p.created.last_seq, p.created.status
    else:
        last, status = p.head.last_seq, p.head.status
    changed = db.execute(
        f"UPDATE runs SET {', '.join(f'{c} = ?' for c in cols)} "
        "WHERE run_id = ? AND last_seq = ? AND status = ?",
        [RUN_COLUMNS[c](p.changes[c]) for c in cols] + [p.run_id, last, str(status)],
    ).rowcount
    return bool(changed)


def _upsert_entities(db: sqlite3.Connection, run_id: str, rows: list[tuple[str, str]]) -> None:
    for start in range(0, len(rows), ROWS_PER_INSERT * 2):
        chunk = rows[start : start + ROWS_PER_INSERT * 2]
        db.execute(
            "INSERT INTO entities (run_id, cid, status) VALUES "
            + ",".join(["(?,?,?)"] * len(chunk))
            + " ON CONFLICT (run_id, cid) DO UPDATE SET status = excluded.status",
            [v for cid, st in chunk for v in (run_id, cid, st)],
        )


def _side_effects(db: sqlite3.Connection, event: Event) -> None:
    """Hook rows and the pinned definition of one event, in log order."""
    run_id, cid = event.run_id, event.correlation_id
    if event.type is EventType.HOOK_CREATED:
        _insert_hook(db, event)
    elif event.type is EventType.HOOK_DISPOSED:
        db.execute("UPDATE hooks SET active = 0 WHERE run_id = ? AND cid = ?", (run_id, cid))
    elif event.type in RUN_TERMINAL_EVENTS:
        db.execute("UPDATE hooks SET active = 0 WHERE run_id = ?", (run_id,))
    elif event.type is EventType.ATTRIBUTES_SET:
        update = payload(event)
        assert isinstance(update, AttributesSet)
        attribute_index.set_attributes(db, run_id, update.values)
    pin = pinned_definition(event)
    if pin is not None:
        db.execute(
            "UPDATE runs SET attributes = json_set(attributes, '$.definition', json(?)) "
            "WHERE run_id = ? AND json_extract(attributes, '$.definition') IS NULL",
            (json.dumps(pin), run_id),
        )


def _insert_hook(db: sqlite3.Connection, event: Event) -> None:
    token = str(event.data.get("token"))
    row = (token, event.run_id, event.correlation_id, event.created_at)
    sql = "INSERT INTO hooks (token, run_id, cid, active, created_at) VALUES (?,?,?,1,?)"
    try:
        db.execute(sql, row)
        return
    except sqlite3.IntegrityError:
        holder = free_stale_token(db, token)
        if holder is not None:
            raise HookTokenConflictError.held_by(token, holder, event.run_id) from None
    try:
        db.execute(sql, row)
    except sqlite3.IntegrityError:
        raise CorruptLogError(
            event.run_id,
            event.seq,
            f"a row the world did not write holds hook {event.correlation_id}",
            store="hooks table",
            drop=False,
        ) from None


def advance(p: Plan) -> Head:
    """The head after the plan was written (the head's own map, updated in place)."""
    head = p.head
    head.last_seq = p.events[-1].seq if p.events else head.last_seq
    head.status = p.status
    head.block = p.block if p.status is RunStatus.BLOCKED else None
    for step in p.entities:
        if step is not None:
            head.entities[step[0]] = step[1]
    return head
