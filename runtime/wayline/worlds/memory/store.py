"""What the in-memory world stores, shared by every :class:`~.world.MemoryWorld` opened on
it, as every process shares one SQLite file or one JetStream domain.

The log is validated exactly as the other worlds validate it (``events.apply_transition``
after ``events.stamped``), and an append is planned on copies and committed only when every
event of it passed, so a refused append writes nothing.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._core import clock, ordering
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
from ..._core.rate_limits import Bucket
from ...errors import HookTokenConflictError, SequenceConflictError
from ...world import RunInfo, fold_run
from .hook_buffer import MemoryHookBuffer


@dataclass(slots=True)
class HookRow:
    token: str
    run_id: str
    cid: str
    active: bool
    created_at: float


@dataclass(slots=True)
class Message:
    id: int
    topic: str
    body: bytes
    key: str | None
    available_at: float
    created_at: float
    attempts: int = 0
    handbacks: int = 0
    held_handbacks: int = 0
    """The hand-backs in a row made over a pause (``Delivery.held_handbacks``)."""
    held: bool = False
    level: int = ordering.DEFAULT_PRIORITY
    """Its priority (``_core/ordering.py``)."""
    ready_at: float = 0.0
    """Since when it has waited ready: its level's aging counts from its oldest."""
    fair_tag: float = 0.0


@dataclass(slots=True)
class Slot:
    acquired_at: float
    expires_at: float | None
    token: str | None


@dataclass(slots=True)
class MemoryStore:
    """Every table of the world. Its methods are synchronous: one call is one transaction,
    since nothing else runs on the event loop's thread meanwhile."""

    runs: dict[str, RunInfo] = field(default_factory=dict)
    logs: dict[str, list[Event]] = field(default_factory=dict)
    entities: dict[str, dict[str, str]] = field(default_factory=dict)
    blocks: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    hooks: list[HookRow] = field(default_factory=list)
    messages: dict[int, Message] = field(default_factory=dict)
    topics: dict[str, dict[int, Message]] = field(default_factory=dict)
    """The same messages by topic, each topic's in the order of their ids: a receive reads
    its own topic's, not every message of the store (``add_message``, ``remove_message``)."""
    keys: dict[str, int] = field(default_factory=dict)
    next_message: int = 1
    appends: int = 0
    """Appends so far, to any run (``runs_mark``)."""
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    served: dict[str, dict[str, Any]] = field(default_factory=dict)
    fair_clocks: dict[str, ordering.FairClock] = field(default_factory=dict)
    """Per topic: the fair queuing of its ready work (``_core/ordering.py``, rule 2)."""
    streams: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    slots: dict[str, dict[str, Slot]] = field(default_factory=dict)
    buckets: dict[str, Bucket] = field(default_factory=dict)
    archived: int = 0
    blobs: dict[tuple[str, str], tuple[bytes, float]] = field(default_factory=dict)
    """By (run id, digest): what ``put_blob`` stored, and when. The memory world keeps every
    payload of its events inline (it has no size limit), so only the blob port's callers put
    here."""
    hook_buffer: MemoryHookBuffer = field(default_factory=MemoryHookBuffer)
    peers: list[weakref.ref[Any]] = field(default_factory=list)
    """The worlds opened on this store: an append wakes their waiters and watchers, as a
    change feed would. A list, so that they are woken in the order they were opened."""
    now: Callable[[], float] = clock.now
    """The store's clock, which stamps its events and measures its delays and leases: the
    world's time. The process's own clock in one process; the simulator gives its store the
    true virtual time, while each simulated worker reads a clock of its own (``sim/clocks.py``)."""

    def __post_init__(self) -> None:
        self.hook_buffer.now = self.now

    def append(
        self, run_id: str, events: Sequence[NewEvent], expected_seq: int | None, now: float
    ) -> list[Event]:
        log = self.logs.get(run_id, [])
        info = self.runs.get(run_id)
        last = info.last_seq if info is not None else 0
        if expected_seq is not None and expected_seq != last:
            raise SequenceConflictError(
                f"run {run_id} is at seq {last}, writer expected {expected_seq}", last_seq=last
            )
        status = info.status if info is not None else None
        block = self.blocks.get(run_id)
        entities = dict(self.entities.get(run_id, {}))
        hook_changes: list[tuple[str, Event]] = []
        out: list[Event] = []
        seq = last
        for new in events:
            new = stamped(new, status, block)
            cid = new.correlation_id
            before = entities.get(cid) if cid is not None else None
            status, after = apply_transition(status, before, new, block, appending=True)
            if new.type is EventType.RUN_BLOCKED:
                block = dict(new.data)
            if cid is not None and after is not None:
                entities[cid] = after
            seq += 1
            # A JSON round trip copies the data and refuses what the other worlds cannot store.
            data = json.loads(json.dumps(dict(new.data)))
            event = Event(run_id, seq, new.type, cid, data, now)
            info = fold_run(info, event)
            if new.type is EventType.HOOK_CREATED:
                hook_changes.append(("create", event))
            elif new.type is EventType.HOOK_DISPOSED:
                hook_changes.append(("dispose", event))
            elif new.type in RUN_TERMINAL_EVENTS:
                hook_changes.append(("end", event))
            out.append(event)
        if not out or info is None:
            return out
        self._check_tokens(run_id, hook_changes)
        self.logs[run_id] = [*log, *out]
        self.runs[run_id] = info
        self.entities[run_id] = entities
        self.blocks[run_id] = block if status is RunStatus.BLOCKED else None
        for what, event in hook_changes:
            self._hook_change(what, event)
        return out

    def _check_tokens(self, run_id: str, changes: list[tuple[str, Event]]) -> None:
        """A hook's token must be free when its hook is created, judged in log order (a hook
        this append disposes of first frees its token for a later one of the same append)."""
        held = {h.token: h.run_id for h in self.hooks if h.active and self._live_hook(h)}
        for what, event in changes:
            if what == "create":
                token = str(event.data.get("token"))
                if token in held:
                    raise HookTokenConflictError.held_by(token, held[token], run_id)
                held[token] = run_id
            elif what == "dispose":
                held = {
                    t: r
                    for t, r in held.items()
                    if not (r == run_id and self._cid_of(t) == event.correlation_id)
                }
            else:
                held = {t: r for t, r in held.items() if r != run_id}

    def _cid_of(self, token: str) -> str | None:
        for row in reversed(self.hooks):
            if row.token == token and row.active:
                return row.cid
        return None

    def _live_hook(self, row: HookRow) -> bool:
        info = self.runs.get(row.run_id)
        if info is None or info.status.terminal:
            return False
        return self.entities.get(row.run_id, {}).get(row.cid) == HOOK_ACTIVE

    def _hook_change(self, what: str, event: Event) -> None:
        if what == "create":
            token = str(event.data.get("token"))
            for row in self.hooks:
                if row.token == token:
                    row.active = False
            self.hooks.append(
                HookRow(token, event.run_id, str(event.correlation_id), True, event.created_at)
            )
            return
        for row in self.hooks:
            if row.run_id == event.run_id and (what == "end" or row.cid == event.correlation_id):
                row.active = False

    def hook(self, token: str) -> HookRow | None:
        """The active hook holding ``token``, else the most recent one that held it."""
        rows = [h for h in self.hooks if h.token == token]
        active = [h for h in rows if h.active and self._live_hook(h)]
        if active:
            return active[-1]
        rows = [h for h in rows if not h.active]
        return max(rows, key=lambda h: h.created_at) if rows else None

    def drop_runs(self, ids: Sequence[str]) -> None:
        gone = set(ids)
        for run_id in gone:
            self.runs.pop(run_id, None)
            self.logs.pop(run_id, None)
            self.entities.pop(run_id, None)
            self.blocks.pop(run_id, None)
        self.hooks = [h for h in self.hooks if h.run_id not in gone]
        self.streams = {k: v for k, v in self.streams.items() if k[0] not in gone}
        self.blobs = {k: v for k, v in self.blobs.items() if k[0] not in gone}
        for holders in self.slots.values():
            for run_id in gone & holders.keys():
                del holders[run_id]
        for mid, message in list(self.messages.items()):
            if run_of(message.body) in gone:
                self.remove_message(mid)

    def drop_orphan_blobs(self, stored_by: float) -> None:
        """Delete the blobs stored by ``stored_by`` whose run id has no run (see
        ``wayline.world.blobs.ORPHAN_GRACE_SECONDS``)."""
        self.blobs = {k: v for k, v in self.blobs.items() if k[0] in self.runs or v[1] > stored_by}

    def add_message(self, message: Message) -> None:
        self.messages[message.id] = message
        self.topics.setdefault(message.topic, {})[message.id] = message

    def remove_message(self, mid: int) -> None:
        message = self.messages.pop(mid)
        del self.topics[message.topic][mid]
        if message.key is not None and self.keys.get(message.key) == mid:
            del self.keys[message.key]

    def ended_before(self, cutoff: float, statuses: list[str]) -> list[str]:
        chosen = [
            i
            for i in self.runs.values()
            if str(i.status) in statuses and i.ended_at is not None and i.ended_at <= cutoff
        ]
        chosen.sort(key=lambda i: (i.ended_at or 0.0, i.run_id))
        return [i.run_id for i in chosen]


def run_of(body: bytes) -> str | None:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    run_id = payload.get("runId") if isinstance(payload, dict) else None
    return run_id if isinstance(run_id, str) else None
