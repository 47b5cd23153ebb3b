"""This process's projection of the runs' logs on JetStream (``eventlog``): one
:class:`RunState` per run, the most recently used :data:`CACHE_RUNS` of them kept."""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from ..._core.events import Event, EventType, NewEvent, RunStatus, apply_transition, entity_kind
from ...world import RunInfo, fold_run

CACHE_RUNS = 4096
"""Runs whose projection a process keeps; a run pushed out is read again when next needed."""


@dataclass(slots=True)
class RunState:
    """This process's projection of one run's log (see the module docstring)."""

    run_id: str
    subject: str
    stream_seq: int = 0
    last_seq: int = 0
    status: RunStatus | None = None
    entities: dict[str, str] = field(default_factory=dict)
    hook_tokens: dict[str, str] = field(default_factory=dict)
    base: RunInfo | None = None
    """The run view folded through the last run-level event (entity events only move
    ``last_seq`` and ``updated_at``, which ``info`` applies lazily)."""
    updated_at: float = 0.0
    events: list[Event] = field(default_factory=list)
    loaded: bool = False
    last_id: str = ""
    """The Nats-Msg-Id of the last message folded in (``mark``): unique per append."""
    heard: int = 0
    """The highest stream sequence heard appended to the run (its republish), by anyone."""
    seen: int = 0
    """The highest stream sequence of the run's log this process has read or appended: kept
    through :meth:`reset`, so that a read which ends below it is known to come from a replica
    that has not caught up (``EventLog._catch_up``), never taken for the run as it is."""
    epoch: int = -1
    """The hearing epoch (``EventLog.hints_lost``) in which the view was last proved complete
    (a catch-up, or a fenced append), counted from before that read or append began."""
    proved_at: float = -math.inf
    """When (monotonic) that read or append began."""
    appended_id: str = ""
    """The Nats-Msg-Id of this view's own last append (a mark names only a view that ends
    with its sender's append)."""
    first_id: str = ""
    """The Nats-Msg-Id of the run's first message: its incarnation (``blobs.py``)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    summary_of: RunInfo | None = None
    summary_head: bytes = b""
    """``summary_of``'s stored summary without ``lastSeq``, as JSON minus its closing brace."""

    def absorb(self, events: list[Event], stream_seq: int, msg_id: str) -> None:
        for ev in events:
            cid = ev.correlation_id
            before = self.entities.get(cid) if cid is not None else None
            block = self.base.error if self.base is not None else None  # while blocked: its data
            self.status, after = apply_transition(
                self.status, before, NewEvent(ev.type, cid, ev.data), block
            )
            if cid is not None and after != before:
                if after is None:
                    self.entities.pop(cid, None)
                else:
                    self.entities[cid] = after
            if ev.type is EventType.HOOK_CREATED and cid is not None:
                self.hook_tokens[cid] = str(ev.data.get("token"))
            if entity_kind(ev.type) is None:  # every run-level event moves the run view
                self.base = fold_run(self.base, ev)
            self.last_seq = ev.seq
            self.updated_at = ev.created_at
        if events and events[0].seq == 1:
            self.first_id = msg_id
        self.events.extend(events)
        self.stream_seq = stream_seq
        self.seen = max(self.seen, stream_seq)
        self.last_id = msg_id

    def reset(self) -> None:
        self.stream_seq = self.last_seq = 0
        self.status = self.base = None
        self.entities, self.hook_tokens, self.events = {}, {}, []
        self.loaded = False
        self.last_id = self.appended_id = self.first_id = ""
        self.epoch = -1
        self.proved_at = -math.inf

    @property
    def info(self) -> RunInfo | None:
        base = self.base
        if base is None or base.last_seq == self.last_seq:
            return base
        self.base = replace(base, last_seq=self.last_seq, updated_at=self.updated_at)
        return self.base


class RunCache(OrderedDict[str, RunState]):
    """The projections by run id, least recently used first."""

    def state(self, run_id: str, subject: str) -> RunState:
        """The run's projection, made empty (to be caught up) when it is not kept, and marked
        the most recently used; the least recently used is dropped past :data:`CACHE_RUNS`."""
        st = self.get(run_id)
        if st is None:
            st = self[run_id] = RunState(run_id, subject)
            while len(self) > CACHE_RUNS:
                self.popitem(last=False)
        else:
            self.move_to_end(run_id)
        return st
