"""The event log on JetStream.

One stream; one subject per run (``<prefix>.ev.<run>``). One append is one message holding
the whole batch, so a batch is atomic and costs one round trip. Each message is published with
``Nats-Expected-Last-Subject-Sequence`` set to the last stream sequence this process saw on the
run's subject, so concurrent writers (in any process) serialize and one terminal write wins.
The dense per-run ``seq`` is carried in the message; ``created_at`` is the stored message's
server timestamp, learned from the stream's headers-only republish (or a direct get).

Every process keeps a projection per run (statuses of the run and its entities, the run view,
the events) and catches up from the server only when the server says it is behind (a 10071 on
publish, or a validation error to be confirmed). A writer whose ack was lost and who then meets
10071 looks for its own ``Nats-Msg-Id`` among the messages it catches up on: "maybe it was me".
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._core import jsoncodec, search_attributes
from ..._core.events import (
    Event,
    EventType,
    NewEvent,
    RunStatus,
    apply_transition,
    entity_kind,
    stamped,
)
from ..._core.search_attributes import Where
from ...errors import (
    CorruptLogError,
    HookTokenConflictError,
    RunNotFoundError,
    SequenceConflictError,
    WaylineError,
    WorldError,
    WorldUnavailableError,
)
from ...world import HookInfo, RunInfo, entries, fold_run
from ...world.blobs import is_incarnation
from ...world.entries import corrupt_info
from . import wire
from .codec import HERE, dumps, parse_stamp, wrap
from .direct import (
    Acked,
    StoredMsg,
    connected,
    direct_batch,
    last_seq,
    leader_read_subject,
    leader_stamp,
    read_subject,
)
from .gather import Gather
from .hook_claims import HookClaims
from .logcheck import as_number, checked_summary, decode_entry
from .names import Names, subject_token, token_value
from .run_cache import RunCache, RunState
from .skew import Skew

log = logging.getLogger("wayline.worlds.nats")

_MAX_ROUNDS = 50
"""Validate-and-publish rounds of one append before giving up under contention."""
_MULTI_LAST = 500
"""Subjects per multi_last direct get (the server answers 413 past 1024 matches)."""
_TERMINAL_HEADER = "Wayline-Terminal"
_CURRENT_FOR = 1.0
"""Seconds a view proved complete is taken for current (``EventLog._current``) when nothing
past it was heard."""
_STAMP_SLACK = 1.0
"""Seconds a republished stamp may lie outside its publish's window on the server's clock as
learnt so far (``skew.py``: the offset is known to about half the best round trip)."""


@dataclass(slots=True)
class _Plan:
    body: bytes
    hooks: list[tuple[str, str]]
    """(correlation id, token) of the batch's hook_created events."""
    events: list[NewEvent]
    """The batch as recorded (``events.stamped``)."""
    terminal: bool = False
    """The batch ends the run (its message then carries ``Wayline-Terminal``)."""


def _summary(info: RunInfo) -> dict[str, Any]:
    return {
        "runId": info.run_id,
        "workflow": info.workflow,
        "status": str(info.status),
        "output": info.output,
        "error": None if info.error is None else dict(info.error),
        "attributes": dict(info.attributes),
        "createdAt": info.created_at,
        "startedAt": info.started_at,
        "endedAt": info.ended_at,
        "lastSeq": info.last_seq,
    }


def _plan(st: RunState, events: Sequence[NewEvent]) -> _Plan:
    """Validate a batch against the projection; raises the typed errors of apply_transition."""
    status = st.status
    overlay: dict[str, str | None] = {}
    info = st.base
    seq = st.last_seq
    hooks: list[tuple[str, str]] = []
    batch: list[dict[str, Any]] = []
    recorded: list[NewEvent] = []
    for new in events:
        block = info.error if info is not None else None  # while blocked: the block's data
        new = stamped(new, status, block)
        recorded.append(new)
        cid = new.correlation_id
        before = (overlay[cid] if cid in overlay else st.entities.get(cid)) if cid else None
        status, after = apply_transition(status, before, new, block, appending=True)
        if cid is not None and after != before:
            overlay[cid] = after
        if new.type is EventType.HOOK_CREATED:
            token = str(new.data.get("token"))
            if any(t == token for _, t in hooks):  # twice in this batch
                raise HookTokenConflictError.held_by(token, st.run_id, st.run_id)
            hooks.append((str(cid), token))
        seq += 1
        if entity_kind(new.type) is None:  # every run-level event moves the run view
            info = fold_run(info, Event(st.run_id, seq, new.type, cid, new.data, HERE))
        batch.append({"t": str(new.type), "c": cid, "d": dict(new.data)})
    assert info is not None
    if st.summary_of is not info:  # most batches move no run-level field: encode it once
        summary = _summary(info)
        del summary["lastSeq"]
        st.summary_of, st.summary_head = info, dumps(summary)[:-1]
    body = b'{"s":%d,"e":%s,"r":%s,"lastSeq":%d}}' % (
        st.last_seq + 1,
        dumps(batch),
        st.summary_head,
        seq,
    )
    return _Plan(body, hooks, recorded, status is not None and status.terminal)


def _search_holds(where: Sequence[Where], attributes: Any) -> bool:
    held = search_attributes.stored(attributes) if isinstance(attributes, Mapping) else {}
    return search_attributes.matches(where, held)


def _ended_and_idle(st: RunState) -> bool:
    """A cached view of an ended run that no read or append is using (one being read is
    rebuilt by that read, if its messages changed)."""
    return st.status is not None and st.status.terminal and not st.lock.locked()


def _expire(waiter: asyncio.Future[float]) -> None:
    if not waiter.done():
        waiter.set_result(math.nan)


class EventLog:
    def __init__(
        self,
        nc: Any,
        js: Any,
        names: Names,
        *,
        url: str,
        timeout: float,
        on_terminal: Callable[[str], None] | None = None,
        skew: Skew | None = None,
        gather: int = 0,
    ) -> None:
        self.partitions = 1
        """How many partitions' logs this one reads: 1, the log of one partition; the
        partitioned world's reader of them all (``partitions.AllPartitions``) says more."""
        self.skew = Skew() if skew is None else skew
        self.gather = Gather(nc, timeout=timeout, url=url, min_batch=gather)
        """Publishes the appends, concurrent runs' together as atomic batches (``gather``: the
        fewest appends of a turn that go as one, 1 for ``gather.MIN_BATCH``; 0: never)."""
        """Learns the server's clock from each append's stamp (``skew.py``)."""
        self._on_terminal = on_terminal
        """Told the run id of every terminal append on the stream, by whichever writer."""
        self._nc = nc
        self._js = js
        self._names = names
        self._url = url
        self._timeout = timeout
        self._stream = names.events_stream
        self._runs = RunCache()
        self.claims = HookClaims(
            js, names, url=url, skew=self.skew, catch_up=self._catch_up, fresh=self._fresh
        )
        """The hook tokens' claims (``hook_claims``), taken and given back by appends."""
        self._stamps: dict[int, float] = {}
        self._stamp_waiters: dict[int, asyncio.Future[float]] = {}
        self._inflight: dict[str, int] = {}
        self._stamp_sub: Any = None
        self._hearing = 0
        """Bumped whenever a republish may have been missed (``hints_lost``)."""
        self.listeners: set[Callable[[str], None]] = set()
        """Told the subject token of every run an append moved (the world's change feed)."""

    async def start(self) -> None:
        await self.claims.start()
        stamps = self._names.stamps_wildcard
        self._stamp_sub = await wire.subscribe(self._nc, stamps, self._on_stamp)

    async def close(self) -> None:
        if self._stamp_sub is not None:
            try:
                await self._stamp_sub.unsubscribe()
            except Exception:  # closing anyway
                pass
            self._stamp_sub = None

    # projection ---------------------------------------------------------------------------
    def _state(self, run_id: str) -> RunState:
        return self._runs.state(run_id, self._names.run_subject(run_id))

    async def _catch_up(
        self, st: RunState, look_for: str | None = None, at_least: int = 0
    ) -> list[Event] | None:
        """Read what the server has after the projection; return the events of the message
        whose Nats-Msg-Id is ``look_for`` if it is among them.

        Any replica may answer a direct get, and one that has not caught up (after a partition
        or a restart) answers with a shorter log: a read ending below the newest message this
        process has read, appended or heard of on the run (``RunState.seen``, ``heard``), or
        below ``at_least`` (a 10071 says the leader holds more), is read again from the stream
        leader, which holds every acknowledged append. So a process never goes back to an older
        state of a run than one it has returned, and reads its own appends."""
        epoch, began, heard = self._hearing, time.monotonic(), st.heard
        floor = max(st.seen, heard, at_least)
        msgs = await self._after_view(st, leader=False)
        if msgs is None or (msgs[-1].seq if msgs else st.stream_seq) < floor:
            msgs = await self._from_leader(st, floor)
            if msgs is None:
                # the leader has lost the last message we know too: the run was deleted
                # (cleanup, archive) or edited behind our back, and the projection is rebuilt
                st.reset()
                msgs = await self._read(st, 0, leader=True)
            last = msgs[-1].seq if msgs else st.stream_seq
            st.seen = last  # the leader's log is the run as it is (it may have been deleted)
            if st.heard == heard:  # a republish past the leader's log was not a real one
                st.heard = min(heard, last)
        mine: list[Event] | None = None
        for msg in msgs:
            try:
                events, _, _ = decode_entry(st.run_id, msg, st.last_seq + 1)
                st.absorb(events, msg.seq, msg.headers.get("Nats-Msg-Id") or "")
            except CorruptLogError:
                st.reset()  # fenced: every reader meets the same entry until it is repaired
                raise
            except (WaylineError, TypeError, ValueError, KeyError, AttributeError) as err:
                st.reset()
                why = err.message if isinstance(err, WaylineError) else repr(err)[:200]
                raise CorruptLogError(
                    st.run_id, msg.seq, f"does not follow from the entries before it: {why}"
                ) from None
            if look_for is not None and msg.headers.get("Nats-Msg-Id") == look_for:
                mine = events
        st.loaded = True
        st.epoch, st.proved_at = epoch, began
        return mine

    async def _from_leader(self, st: RunState, floor: int) -> list[StoredMsg] | None:
        """:meth:`_after_view` from the stream leader, asked again for up to the request
        timeout while the server answers that JetStream is unavailable (a node that has just
        come back from a partition says so until it has caught up on the cluster's state);
        between attempts the direct read is tried again, and taken once it reaches
        ``floor``. Never an answer below ``floor`` from a replica."""
        deadline = time.monotonic() + self._timeout
        pause = 0.05
        while True:
            try:
                return await self._after_view(st, leader=True)
            except WorldUnavailableError:
                if time.monotonic() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(0.5, pause * 2)
            try:
                msgs = await self._after_view(st, leader=False)
            except WorldUnavailableError:
                continue
            if msgs is not None and (msgs[-1].seq if msgs else st.stream_seq) >= floor:
                return msgs

    async def _after_view(self, st: RunState, *, leader: bool) -> list[StoredMsg] | None:
        """The stored messages past the projection (``leader``: as the stream leader has
        them); None when the last message the projection holds is not among what the read
        finds (deleted, or not there yet)."""
        if not st.stream_seq:
            return await self._read(st, 0, leader=leader)
        # the read starts at the last message we know, to tell that it is still there
        msgs = await self._read(st, st.stream_seq - 1, leader=leader)
        if msgs and msgs[0].seq == st.stream_seq:
            return msgs[1:]
        return None

    async def _read(self, st: RunState, after: int, *, leader: bool = False) -> list[StoredMsg]:
        """The run's stored messages past stream sequence ``after``: by batch direct gets,
        which any replica answers, or (``leader``) one by one from the stream leader."""
        reader = leader_read_subject if leader else read_subject
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            return await reader(
                self._nc, self._stream, st.subject, after, timeout=self._timeout, url=self._url
            )
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, f"reading run {st.run_id}", err) from err

    async def incarnation(self, run_id: str, events: Sequence[NewEvent], msg_id: str) -> str | None:
        """The incarnation under which an append of ``events`` (published as ``msg_id``)
        stores its out-of-line payloads (``blobs.py``): ``msg_id`` for the run's
        ``run_created``, else the Nats-Msg-Id of the run's first message (None when it has
        none a name can hold: a log Wayline did not write, whose blobs are named without).

        A ``run_created`` is checked against the server first, and refused as its append
        would be when the run exists: a start repeated with the same id (idempotent, and a
        large input is the rule for some callers) stores nothing for a run that is not its
        own. Asked only when a payload is stowed, so a small append costs no read."""
        st = self._state(run_id)
        async with st.lock:
            creating = events[0].type is EventType.RUN_CREATED
            if creating or not st.loaded:
                await self._catch_up(st)
            if creating:
                _plan(st, events)
                return msg_id
            return st.first_id if is_incarnation(st.first_id) else None

    async def run_incarnation(self, run_id: str) -> str | None:
        """The incarnation of the run as it is now (``blobs.py``): what a blob stored for it
        apart from an append (the blob port's put) is named under, so that its cleanup takes
        the blob whenever it was stored. None: no run, or a log Wayline did not write."""
        st = self._state(run_id)
        async with st.lock:
            if not st.loaded:
                await self._catch_up(st)
            return st.first_id if is_incarnation(st.first_id) else None

    async def _fresh(self, run_id: str) -> RunState:
        st = self._state(run_id)
        async with st.lock:
            await self._catch_up(st)
        return st

    # timestamps ---------------------------------------------------------------------------
    def _on_stamp(self, msg: Any) -> None:
        headers = msg.headers or {}
        token = msg.subject.rpartition(".")[2]
        try:
            self._heard(token, headers)
        finally:  # a watcher that raises takes nothing from the others, nor from this log
            for listener in list(self.listeners):
                try:
                    listener(token)
                except Exception as err:
                    log.warning("a run watcher failed on %s: %r", token, err, exc_info=True)

    def _heard(self, token: str, headers: dict[str, str]) -> None:
        """An append to the run ``token`` was stored (its republish): what it tells."""
        try:
            seq: int | None = int(headers["Nats-Sequence"])
        except (KeyError, ValueError):
            seq = None
        held = self._runs.get(token_value(token) or "")
        if held is not None and seq is not None:
            held.heard = max(held.heard, seq)
            if _ended_and_idle(held) and seq > held.stream_seq:
                held.reset()  # an ended run takes no append: its id was used again
        ended = headers.get(_TERMINAL_HEADER)
        if ended is not None and self._on_terminal is not None:
            self._on_terminal(ended)
        if seq is None or headers.get("Nats-Subject") not in self._inflight:
            return
        try:
            stamp = parse_stamp(headers["Nats-Time-Stamp"])
        except (KeyError, ValueError):
            return
        waiter = self._stamp_waiters.pop(seq, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(stamp)
        else:
            if len(self._stamps) > 10_000:
                self._stamps.clear()
            self._stamps[seq] = stamp

    async def _stamp(self, acked: Acked) -> float:
        """The server's timestamp of the stored message ``acked``: its republish (the
        events stream's headers-only copy, on core NATS) when it came in time and is
        plausible, else the stored message's. Anyone can publish on the republish subjects:
        a stamp outside the publish's own window (on the server's clock as learnt so far,
        give or take ``_STAMP_SLACK``) is read from the store instead, never taken as the
        events' time (a forged one made a sleep end at once)."""
        seq = acked.seq
        stamp = self._stamps.pop(seq, None)
        if stamp is None:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[float] = loop.create_future()
            self._stamp_waiters[seq] = waiter
            timer = loop.call_later(0.2, _expire, waiter)
            try:
                stamp = await waiter
            finally:
                timer.cancel()
                self._stamp_waiters.pop(seq, None)
            if math.isnan(stamp):  # our own republish did not come: others' may be lost too
                self.hints_lost()
        offset = self.skew.offset
        if acked.first and (
            acked.sent + offset - _STAMP_SLACK <= stamp <= acked.acked + offset + _STAMP_SLACK
        ):
            return stamp  # (NaN, a republish that did not come in time, is never in)
        try:  # the republish was lost (reconnect, slow consumer) or is not plausible
            return await leader_stamp(
                self._nc, self._stream, seq, timeout=self._timeout, url=self._url
            )
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, "reading a stored timestamp", err) from err

    # append -------------------------------------------------------------------------------
    async def append(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        expected_seq: int | None,
        msg_id: str | None = None,
    ) -> list[Event]:
        if not events:
            return []
        st = self._state(run_id)
        async with st.lock:
            fresh = False
            if not st.loaded and events[0].type is not EventType.RUN_CREATED:
                await self._catch_up(st)
                fresh = True
            # (a new run is published optimistically against an empty subject: a 10071 says
            # it exists, and the catch-up that follows turns that into EntityConflictError)
            msg_id = msg_id or uuid.uuid4().hex
            claims: dict[str, tuple[str, int, int]] = {}
            done = False
            try:
                for _ in range(_MAX_ROUNDS):
                    try:
                        if expected_seq is not None and expected_seq != st.last_seq:
                            raise SequenceConflictError(
                                f"run {run_id} is at seq {st.last_seq}, writer expected "
                                f"{expected_seq}",
                                last_seq=st.last_seq,
                            )
                        plan = _plan(st, events)
                        await self.claims.claim_tokens(st, plan.hooks, claims)
                    except WorldUnavailableError:
                        raise
                    except WorldError:
                        if fresh:
                            raise
                        await self._catch_up(st)  # confirm against the server first
                        fresh = True
                        continue
                    stored = await self._publish(st, plan, msg_id)
                    if stored is None:  # another writer got there first: re-validate
                        fresh = True
                        continue
                    done = True
                    break
                else:
                    raise SequenceConflictError(
                        f"run {run_id} kept moving under {_MAX_ROUNDS} attempts to append",
                        last_seq=st.last_seq,
                    )
            finally:
                if not done and claims:
                    await self.claims.release_claims(st, claims)
            released = self.claims.tokens_to_release(st, stored)
        if released:
            await asyncio.gather(*(self.claims.dispose_token(run_id, c, t) for c, t in released))
        return stored

    async def _publish(self, st: RunState, plan: _Plan, msg_id: str) -> list[Event] | None:
        headers = {
            "Nats-Msg-Id": msg_id,
            "Nats-Expected-Last-Subject-Sequence": str(st.stream_seq),
        }
        if plan.terminal:
            headers[_TERMINAL_HEADER] = st.run_id
        subject = st.subject
        epoch, began = self._hearing, time.monotonic()
        self._inflight[subject] = self._inflight.get(subject, 0) + 1
        try:
            # a retry carries the same Nats-Msg-Id and expected sequence: an earlier attempt
            # that landed makes it a duplicate or a 10071
            acked = await self.gather.publish(
                subject, plan.body, headers, doing=f"appending to run {st.run_id}"
            )
            if acked is None:  # 10071: someone else's message (or our own, answer lost)
                before = st.stream_seq
                # the leader holds a message past ``before``: a read ending at it is stale
                mine = await self._catch_up(st, look_for=msg_id, at_least=before + 1)
                if mine is None and st.stream_seq == before:
                    # nothing new, yet the server disagrees: messages were removed
                    # behind our back. Rebuild the projection from what is stored.
                    st.reset()
                    mine = await self._catch_up(st, look_for=msg_id)
                return mine
            if acked.duplicate:
                return await self._catch_up(st, look_for=msg_id)
            seq = acked.seq
            stamp = await self._stamp(acked)
            if acked.first:  # a retried publish may have been stored by an earlier one
                self.skew.sample(acked.sent, acked.acked, stamp)
        finally:
            left = self._inflight.get(subject, 1) - 1
            if left:
                self._inflight[subject] = left
            else:
                self._inflight.pop(subject, None)
        first = st.last_seq + 1
        out = [
            Event(st.run_id, first + i, new.type, new.correlation_id, dict(new.data), stamp)
            for i, new in enumerate(plan.events)
        ]
        copies = jsoncodec.loads(plan.body)["e"]  # the cache keeps its own copy of the data
        cached = [
            Event(e.run_id, e.seq, e.type, e.correlation_id, c["d"], stamp)
            for e, c in zip(out, copies, strict=True)
        ]
        st.absorb(cached, seq, msg_id)
        st.loaded = True  # the expected-sequence check proved the projection was complete
        st.epoch, st.proved_at, st.appended_id = epoch, began, msg_id
        return out

    # hooks (``hook_claims``) ------------------------------------------------------------
    async def get_hook(self, token: str) -> HookInfo | None:
        return await self.claims.get_hook(token)

    # repair -------------------------------------------------------------------------------
    async def repair(self, run_id: str, drop_seq: int | None) -> list[str]:
        """Delete the stored message ``drop_seq`` from the run's log if it is the first one
        that does not read, then read the log again (which names the next bad one, if any)."""
        st = self._state(run_id)
        async with st.lock:
            probe = RunState(run_id, st.subject)
            bad: CorruptLogError | None = None
            try:
                await self._catch_up(probe)
            except CorruptLogError as err:
                bad = err
            done: list[str] = []
            if drop_seq is not None:
                entries.check_drop(run_id, drop_seq, bad)
                try:
                    await self._js.delete_msg(self._stream, drop_seq)
                except Exception as err:
                    raise wrap(self._url, f"removing entry {drop_seq}", err) from err
                done.append(f"removed entry {drop_seq}")
            elif bad is not None:
                raise bad
            st.reset()
            await self._catch_up(st)
            if st.info is None:
                raise RunNotFoundError(f"no run {run_id}")
            done.append(f"the log reads: {st.last_seq} events")
            return done

    # reads --------------------------------------------------------------------------------
    async def list_events(self, run_id: str, after_seq: int) -> list[Event]:
        st = await self._fresh(run_id)
        return st.events[max(0, after_seq) :] if after_seq >= 0 else list(st.events)

    async def events_page(self, run_id: str, after_seq: int, limit: int) -> list[Event]:
        """At most ``limit`` events after ``after_seq``, copied out of the run's view alone
        (not the whole log, as :meth:`list_events` from 0 copies it)."""
        st = await self._fresh(run_id)
        start = max(0, after_seq)
        return st.events[start : start + max(0, limit)]

    async def get_run(self, run_id: str) -> RunInfo | None:
        return (await self._fresh(run_id)).info

    async def read_run(self, run_id: str) -> tuple[RunInfo | None, list[Event]]:
        """The run and its log from one catch-up (one read of the stream, or none)."""
        st = await self._fresh(run_id)
        return st.info, (list(st.events) if st.info is not None else [])

    async def read_run_after(
        self, run_id: str, after_seq: int
    ) -> tuple[RunInfo | None, list[Event]]:
        """The run and the events after ``after_seq`` from one catch-up, without copying the
        events before them (a wake that goes on from a live replay)."""
        st = await self._fresh(run_id)
        return st.info, (st.events[max(0, after_seq) :] if st.info is not None else [])

    def view_at(self, run_id: str, mark: str) -> tuple[RunInfo, list[Event]] | None:
        """This process's view of the run when it still ends at ``mark`` and is current
        (``_current``); None otherwise (read it). See ``World.log_mark``."""
        st = self._runs.get(run_id)
        if st is None or not mark or st.last_id != mark or not self._current(st):
            return None
        info = st.info
        assert info is not None  # (_current)
        self._runs.move_to_end(run_id)
        return info, list(st.events)

    def mark(self, run_id: str) -> str | None:
        """Where this process's view of the run ends (its last message's Nats-Msg-Id), when
        that is the view's own last append and the view is current (``_current``)."""
        st = self._runs.get(run_id)
        if st is None or st.last_id != st.appended_id or not self._current(st):
            return None
        return st.last_id

    def _current(self, st: RunState) -> bool:
        """The view was proved complete (read, or a fenced append) less than ``_CURRENT_FOR``
        ago, and no append past it has been heard since: every append's republish reaches
        this process (the stamps subscription), and one that may have been missed (a lost
        connection, a slow consumer, an own republish that did not come) starts a new
        epoch. Core NATS may still drop one unseen (a route between servers): the time bound
        keeps such a view from being taken for current for long. A write not heard yet is
        one a read made a moment earlier would miss too."""
        return (
            st.loaded
            and bool(st.last_id)
            and st.info is not None
            and self._stamp_sub is not None
            and st.epoch == self._hearing
            and st.heard <= st.stream_seq
            and time.monotonic() - st.proved_at < _CURRENT_FOR
            and not st.lock.locked()
        )

    def hints_lost(self) -> None:
        """A republish may have been missed (a lost connection, a slow consumer): no view is
        taken for current until it is read or appended to again."""
        self._hearing += 1

    def forget_ended(self) -> None:
        """Drop the views of ended runs: a run deleted and started again under its id while
        this process could not hear it (a lost connection) must be read, not remembered."""
        for st in self._runs.values():
            if _ended_and_idle(st):
                st.reset()

    def cached_info(self, run_id: str) -> RunInfo | None:
        """This process's projection of the run, as of its last read or append (no read)."""
        st = self._runs.get(run_id)
        return None if st is None else st.info

    async def list_runs(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        *,
        since: float | None = None,
        where: Sequence[Where] = (),
        run_ids: Iterable[str] | None = None,
        checked: Callable[[str, Mapping[str, Any] | None], None] | None = None,
        after: tuple[float, str] | None = None,
        tokens: Iterable[str] = (),
    ) -> list[RunInfo]:
        """Newest first. ``run_ids``: only those runs (the search attribute index's
        candidates), each judged by its log's summary against ``where``, and those whose
        subject tokens are ``tokens`` (a hashed token does not give its run id back);
        ``checked`` is told each candidate's attributes as its log has them (None: no such
        run); ``after``: only the runs past that ``(created_at, run_id)`` in the order (a
        page's cursor)."""
        wanted = None if run_ids is None else list(run_ids)
        try:
            if wanted is None:
                msgs = await self._last_messages()
            else:
                subjects = [self._names.run_subject(r) for r in wanted]
                subjects += [self._names.token_subject(t) for t in tokens]
                msgs = await self._last_of(subjects)
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, "listing runs", err) from err
        if checked is not None and wanted is not None:
            # compared as tokens: a hashed one does not give its run id back
            read = {m.subject.rsplit(".", 1)[-1] for m in msgs}
            for missing in {r for r in wanted if subject_token(r) not in read}:
                checked(missing, None)
        rows: list[tuple[float, str, dict[str, Any], float, StoredMsg]] = []
        fenced: list[RunInfo] = []
        for msg in msgs:
            run_id = token_value(msg.subject.rsplit(".", 1)[-1])
            try:
                summary, stamp = checked_summary(run_id, msg)
            except (entries.Unreadable, ValueError, IndexError, OverflowError) as err:
                shown = run_id or msg.subject
                fenced.append(corrupt_info(shown, CorruptLogError(shown, msg.seq, str(err))))
                continue
            if not summary:
                continue
            if checked is not None:
                attributes = summary.get("attributes")
                checked(
                    str(summary["runId"]), attributes if isinstance(attributes, Mapping) else {}
                )
            if status is not None and summary["status"] != str(status):
                continue
            if workflow is not None and summary["workflow"] != workflow:
                continue
            if since is not None and float(summary["createdAt"]) < since:
                continue
            if where and not _search_holds(where, summary.get("attributes")):
                continue
            created, run = float(summary["createdAt"]), str(summary["runId"])
            if after is not None and (-created, run) <= (-after[0], after[1]):
                continue
            rows.append((created, run, summary, stamp, msg))
        rows.sort(key=lambda r: (-r[0], r[1]))
        picked = rows[: max(0, limit)]
        out = list(await asyncio.gather(*(self._run_info(s, t, m) for _, _, s, t, m in picked)))
        if status is not None:
            out = [i for i in out if i.status is status]
        if workflow is None and status in (None, RunStatus.CORRUPT) and not where:
            out.extend(fenced)
        return out[: max(0, limit)]

    async def run_tokens(self) -> set[str]:
        """The subject token of every run id the log holds (``names.subject_token``)."""
        return {subject.rsplit(".", 1)[-1] for subject in await self._run_subjects()}

    async def last_appended(self) -> int:
        """The events stream's last sequence: it rises with every append (``runs_mark``)."""
        return await last_seq(self._js, self._stream, self._url, "reading the log's state")

    async def _run_subjects(self) -> list[str]:
        """Every run subject, from the stream's (paged) subject state."""
        subjects: list[str] = []
        offset = 0
        while True:
            request = {"subjects_filter": self._names.events_wildcard, "offset": offset}
            resp = await self._nc.request(
                f"$JS.API.STREAM.INFO.{self._stream}",
                json.dumps(request).encode(),
                timeout=self._timeout,
            )
            info = json.loads(resp.data)
            if "error" in info:
                error = info["error"]
                kind = (
                    WorldUnavailableError
                    if isinstance(error, dict) and error.get("code") == 503
                    else WorldError
                )
                raise kind(f"NATS at {self._url}: stream info failed: {error}")
            page = list((info.get("state") or {}).get("subjects") or {})
            subjects.extend(page)
            offset += len(page)
            if not page or offset >= int(info.get("total") or 0):
                return subjects

    async def _last_messages(self) -> list[StoredMsg]:
        """The last message of every run (multi_last, at most _MULTI_LAST subjects a request)."""
        return await self._last_of(await self._run_subjects())

    async def _last_of(self, subjects: list[str]) -> list[StoredMsg]:
        """The last message of each of ``subjects`` that has one."""
        chunks = [subjects[i : i + _MULTI_LAST] for i in range(0, len(subjects), _MULTI_LAST)]
        results = await asyncio.gather(
            *(
                direct_batch(
                    self._nc,
                    self._stream,
                    {"multi_last": chunk, "batch": len(chunk)},
                    timeout=self._timeout,
                    url=self._url,
                )
                for chunk in chunks
            )
        )
        return [msg for msgs, _ in results for msg in msgs]

    async def _run_info(self, summary: dict[str, Any], stamp: float, last: StoredMsg) -> RunInfo:
        run_id = str(summary["runId"])
        try:
            return await self._summary_info(run_id, summary, stamp, last)
        except CorruptLogError as err:
            return corrupt_info(run_id, err, stamp)

    async def _summary_info(
        self, run_id: str, summary: dict[str, Any], stamp: float, last: StoredMsg
    ) -> RunInfo:
        cached = self._runs.get(run_id)
        if (
            cached is not None
            and cached.info is not None
            and (cached.info.last_seq == summary["lastSeq"])
        ):
            return cached.info
        last_events, _, _ = decode_entry(run_id, last)
        if int(summary["lastSeq"]) == len(last_events):
            first = last  # the run's only message
        else:
            try:
                msgs, _ = await direct_batch(
                    self._nc,
                    self._stream,
                    {"seq": 1, "next_by_subj": last.subject, "batch": 1},
                    timeout=self._timeout,
                    url=self._url,
                )
            except WorldUnavailableError:
                raise
            except Exception as err:
                raise wrap(self._url, "listing runs", err) from err
            first = msgs[0] if msgs else last
        created = decode_entry(run_id, first, 1)[0][0]
        if created.type is not EventType.RUN_CREATED:
            raise CorruptLogError(run_id, first.seq, f"the log starts with {created.type}")
        return RunInfo(
            run_id=run_id,
            workflow=summary["workflow"],
            status=RunStatus(summary["status"]),
            input=created.data.get("input"),
            output=summary.get("output"),
            error=summary.get("error"),
            created_at=float(summary["createdAt"]),
            started_at=as_number(summary.get("startedAt")),
            ended_at=as_number(summary.get("endedAt")),
            updated_at=stamp,
            last_seq=int(summary["lastSeq"]),
            attributes=summary.get("attributes") or {},
        )
