"""Cleanup and archive of terminal runs (seed 004, "Persistence") on JetStream.

Candidates come from the last message of every run (its stored run summary). Deleting a run
purges its event subject, deletes the hook tokens it holds and the queued messages (wakes,
schedules) whose payload names it, releasing their idempotency keys. Archiving first copies
the run's stored messages (bodies and server timestamps) into ``<prefix>_archive`` on the
subject ``<prefix>.ar.<run>``, then deletes it. JetStream has no multi-stream transaction:
each step is idempotent (archive copies are deduplicated by ``Nats-Msg-Id`` and counted by
subject), so a cleanup interrupted half-way is finished by the next one. Processes holding a
projection of a deleted run notice on their next read (their last known message is gone).
An id started again once its log is purged is a new run: the hook claims and queued messages
it made meanwhile are its own and stay, and so is the run when the purge was another process's
(each listed run is read again, as it is deleted, for the end the listing chose).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..._core.events import Event, RunStatus
from ..._core.projections import fold_run
from ...errors import CorruptLogError, WorldError, WorldUnavailableError
from ...world import RunInfo, entries, terminal_statuses
from ...world.blobs import INCARNATION, PAYLOAD_KEYS, REF, is_incarnation, is_ref
from .blobs import Archived
from .codec import dumps, wrap
from .direct import StoredMsg, connected, direct_batch, leader_first, read_subject
from .eventlog import EventLog
from .logcheck import checked_summary, decode_entry
from .names import Names
from .queue import Queue
from .run_cache import RunState

log = logging.getLogger("wayline.worlds.nats")

_ARCHIVE_CHUNK = 256 * 1024
"""Bytes of original message bodies per archive message."""

_ARCHIVE_EVENTS = 1000
"""Events per archive message at most (a message of the log that holds more is not split):
the console's largest page of events (``MAX_PAGE``), so that a page of an archived run reads
at most two of its chunks (issue #37) where a whole 256 KiB chunk of small events held some
1,700 of them."""


class Retention:
    def __init__(
        self,
        nc: Any,
        js: Any,
        names: Names,
        log: EventLog,
        queue: Queue,
        *,
        url: str,
        timeout: float,
    ) -> None:
        self._nc = nc
        self._js = js
        self._names = names
        self._log = log
        self._queue = queue
        self._url = url
        self._timeout = timeout
        self.on_drop: Callable[[RunInfo, str | None, float], Awaitable[None]] | None = None
        """Called for each run dropped, with the run as its log has it, its incarnation
        (``blobs.py``) and its end: the world purges the run's step streams, its index
        entries and, on cleanup, its out-of-line payloads."""

    async def _candidates(
        self, older_than: float, statuses: set[str], limit: int | None
    ) -> list[str]:
        cutoff = _cutoff(older_than)
        try:
            msgs = await self._log._last_messages()
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, "listing runs", err) from err
        rows: list[tuple[float, str]] = []
        for msg in msgs:
            try:
                summary, _ = checked_summary(None, msg)
            except (entries.Unreadable, ValueError, IndexError, OverflowError):
                continue  # a fenced run is repaired (or deleted by hand), never swept
            if not summary or summary["status"] not in statuses:
                continue
            ended = summary.get("endedAt")
            if ended is not None and float(ended) <= cutoff:
                rows.append((float(ended), str(summary["runId"])))
        rows.sort()
        picked = rows if limit is None else rows[:limit]
        return [run_id for _, run_id in picked]

    async def delete_runs(self, older_than: float, statuses: Sequence[RunStatus] | None) -> int:
        chosen = set(terminal_statuses(statuses))
        ids = await self._candidates(older_than, chosen, None)
        return len(await self._drop(ids, chosen, _cutoff(older_than)))

    async def archive_runs(self, older_than: float, limit: int) -> int:
        batch = max(1, min(1000, limit))
        chosen = set(terminal_statuses(None))
        ids = await self._candidates(older_than, chosen, batch)
        copied = [run_id for run_id in ids if await self._archive(run_id)]
        return len(await self._drop(copied, chosen, _cutoff(older_than)))

    async def archived_count(self) -> int:
        try:
            resp = await self._nc.request(
                f"$JS.API.STREAM.INFO.{self._names.archive_stream}", b"", timeout=self._timeout
            )
        except Exception as err:
            raise wrap(self._url, "counting archived runs", err) from err
        info = json.loads(resp.data)
        return int((info.get("state") or {}).get("num_subjects") or 0)

    async def _copies(self, run_id: str, request: dict[str, Any] | None = None) -> list[StoredMsg]:
        """The archive's messages of the run id (each holds copies of its log's messages, or
        is the index of a run's copies): all of them, or those a direct get of ``request``
        answers (one message, for the requests ``archived_page`` makes)."""
        stream, subject = self._names.archive_stream, self._names.archive_subject(run_id)
        try:
            if request is None:
                return await read_subject(
                    self._nc, stream, subject, 0, timeout=self._timeout, url=self._url
                )
            found, _ = await direct_batch(
                self._nc, stream, request, timeout=self._timeout, url=self._url
            )
            return found
        except WorldUnavailableError:
            raise
        except Exception as err:
            raise wrap(self._url, f"reading the archive of run {run_id}", err) from err

    async def archived(self, run_id: str) -> Archived | None:
        """The digests and incarnations that the references of the archive's copies of the run
        id name (``blobs.py``); None when a copy does not read, and so may name any. Most ids
        were never archived: one empty read."""
        msgs = await self._copies(run_id)
        refs: list[dict[str, Any]] = []
        for msg in msgs:
            try:
                body = entries.loads_object(msg.data)
                if _is_index(body):
                    continue
                copies = entries.field(body, "messages", list)
                for copy in copies:
                    for event in entries.field(copy["body"], "e", list):
                        refs += _refs(event.get("d") or {})
            except (entries.Unreadable, TypeError, KeyError, AttributeError):
                return None
        incarnations = (r.get(INCARNATION) for r in refs)
        return Archived(
            digests=frozenset(str(r[REF]) for r in refs),
            incarnations=frozenset(str(i) for i in incarnations if is_incarnation(i)),
        )

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        """The latest run the archive's copies of the id hold, and its log as stored: each
        copy is a message of the run's log as it was (its body and server time), decoded and
        checked as a live log's message is. A copy whose log starts again (an id archived,
        started anew and archived again) begins the run that follows."""
        msgs = await self._copies(run_id)
        events: list[Event] = []
        for msg in msgs:
            for found in _chunk_events(run_id, msg):
                events = found if found[0].seq == 1 else events + found
        if not events:
            return None
        info: RunInfo | None = None
        for event in events:
            info = fold_run(info, event)
        assert info is not None
        return info, events

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        """A page of the latest run archived under the id, from the chunks that hold it
        alone: the archive's last message on the run's subject is the index the archive
        wrote after the run's chunks (``_archive``), which names each chunk's stream sequence
        and the events it holds, so a page reads the index and one or two chunks. An archive
        written before the index existed (its last message is a chunk) is read whole and
        sliced, as before (``archived_run``)."""
        after, limit = max(0, after_seq), max(0, limit)
        subject = self._names.archive_subject(run_id)
        last_msg = await self._direct(run_id, {"multi_last": [subject], "batch": 1})
        if last_msg is None:
            return None
        index = _index_of(run_id, last_msg)
        if index is None:  # written by older code, or a copy that did not read as a log
            found = await self.archived_run(run_id)
            if found is None:
                return None
            info, log = found
            return info.last_seq, [e for e in log if e.seq > after][:limit]
        last = index[-1][1]
        want = min(last, after + limit)  # the page is the events after .. want
        events: list[Event] = []
        for first, end, seq in index:
            if end <= after or first > want:
                continue
            chunk = await self._direct(run_id, {"seq": seq, "next_by_subj": subject, "batch": 1})
            if chunk is None or chunk.seq != seq:
                why = f"the archive's index names chunk {seq}, which is not on the run's subject"
                raise CorruptLogError(run_id, last_msg.seq, why)
            for copied in _chunk_events(run_id, chunk):
                events += copied
        page = [e for e in events if after < e.seq <= want]
        if [e.seq for e in page] != list(range(after + 1, want + 1)):
            why = f"the archive's chunks do not hold events {after + 1} to {want}"
            raise CorruptLogError(run_id, last_msg.seq, why)
        return last, page

    async def _direct(self, run_id: str, request: dict[str, Any]) -> StoredMsg | None:
        """The one archive message a direct get of ``request`` answers, or None."""
        found = await self._copies(run_id, request)
        return found[0] if found else None

    async def _archive(self, run_id: str) -> bool:
        """Copy the run's messages into the archive. False (the run is kept, with a warning)
        when a copy the server took for one already stored is not: anyone can publish under
        the archive's deterministic ``Nats-Msg-Id`` first, and the run must not be dropped on
        the strength of someone else's bytes."""
        st = RunState(run_id, self._names.run_subject(run_id))
        msgs = await self._log._read(st, 0)
        chunks: list[list[dict[str, Any]]] = [[]]
        size = 0
        count = 0
        for msg in msgs:
            if (size > _ARCHIVE_CHUNK or count >= _ARCHIVE_EVENTS) and chunks[-1]:
                chunks.append([])
                size = count = 0
            chunks[-1].append(
                {
                    "seq": msg.seq,
                    "time": msg.headers["Nats-Time-Stamp"],
                    "body": _body(msg.data),
                }
            )
            size += len(msg.data)
            count += _events_in(msg.data)
        index: list[list[int]] | None = []
        for i, chunk in enumerate(chunks):
            if not chunk:
                continue
            body = dumps({"runId": run_id, "part": i, "messages": chunk})
            seq = await self._publish_copy(run_id, body, f"{i}-{chunk[0]['seq']}", f"part {i}")
            if seq is None:
                return False
            span = _span(chunk)
            index = None if index is None or span is None else [*index, [*span, seq]]
        if index:  # none for a log with a message that does not read: that is read whole
            body = dumps({"runId": run_id, "index": index})
            if await self._publish_copy(run_id, body, f"ix-{msgs[0].seq}", "index") is None:
                return False
        return True

    async def _publish_copy(self, run_id: str, body: bytes, key: str, what: str) -> int | None:
        """Publish an archive message of the run, under the ``Nats-Msg-Id`` ``ar-<run>-<key>``:
        its stream sequence, or None when the server took it for one already stored that
        holds other bytes."""
        subject = self._names.archive_subject(run_id)
        try:
            ack = await self._js.publish(
                subject, body, headers={"Nats-Msg-Id": f"ar-{run_id}-{key}"}, timeout=self._timeout
            )
            stored = None
            if ack.duplicate:  # an earlier pass's copy, or someone else's bytes
                stored = await self._js.get_msg(self._names.archive_stream, ack.seq)
        except Exception as err:
            raise wrap(self._url, f"archiving run {run_id}", err) from err
        if stored is not None and (stored.subject != subject or stored.data != body):
            log.warning(
                "not archiving run %s: the archive's message %d carries the id of its "
                "copy (%s) but other bytes; the run is kept",
                run_id,
                ack.seq,
                what,
            )
            return None
        return int(ack.seq)

    async def _drop(self, ids: list[str], statuses: set[str], cutoff: float) -> list[str]:
        """Delete the runs ``ids`` that are still what the listing chose (an end in
        ``statuses`` at or before ``cutoff``), and return those deleted."""
        if not ids:
            return []
        before = await self._queue.last_stored()  # every message of the runs is up to here
        dropped: list[str] = []
        for run_id in ids:
            st = RunState(run_id, self._names.run_subject(run_id))
            try:
                await self._log._catch_up(st)
            except CorruptLogError as err:
                log.warning("not deleting run %s: %s", run_id, err)
                continue
            info = st.info
            ended = info.ended_at if info is not None else None
            if info is None or info.status.value not in statuses or ended is None or ended > cutoff:
                # Another process deleted or archived the run since the listing, and the id
                # may be in use again: that run, its payloads and its messages are not the
                # ended run chosen, and a purge would take them all.
                log.info("not deleting run %s: it is no longer the ended run listed", run_id)
                continue
            dropped.append(run_id)
            # what belongs to the run (step streams, out-of-line payloads) goes first: if
            # that fails, the run is still there for the next cleanup to finish
            if self.on_drop is not None:
                incarnation = st.first_id if is_incarnation(st.first_id) else None
                await self.on_drop(info, incarnation, ended)
            try:
                await self._js.purge_stream(self._names.events_stream, subject=st.subject)
            except Exception as err:
                raise wrap(self._url, f"deleting run {run_id}", err) from err
            for cid, token in st.hook_tokens.items():
                await self._log.claims.drop_token(run_id, cid, token, st.stream_seq)
            self._log._runs.pop(run_id, None)
        await self._drop_messages(set(dropped), before)
        return dropped

    async def _drop_messages(self, ids: set[str], before: int) -> None:
        """Queued messages (and pending schedules) whose payload names a deleted run. One
        stored after ``before`` (the queue's last message before the first purge) goes only
        if its run is still gone: the id may have been started again once its log was purged,
        and that new run's start is not the deleted run's (removed, it left the run pending
        with nothing to wake it)."""
        later: dict[str, list[int]] = {}
        async for msg, payload in self._queue.stored():
            run_id = payload.get("runId")
            if run_id not in ids:
                continue
            if msg.seq <= before:
                await self._queue.remove_stored(msg.seq)
            else:
                later.setdefault(str(run_id), []).append(msg.seq)
        for run_id, seqs in later.items():
            if not await self._gone(run_id):
                continue  # a run is there again: its messages are its own
            for seq in seqs:
                await self._queue.remove_stored(seq)

    async def _gone(self, run_id: str) -> bool:
        """Whether the run's subject is still empty after its purge, as the stream leader has
        it. Not a read of the run (direct gets, which any replica answers): a replica behind
        the new run's ``run_created`` (acked before its start message was even sent) would
        answer "no run", and the new run's start would be removed. Any stored entry counts,
        one that does not read too: a run is there again."""
        subject = self._names.run_subject(run_id)
        try:
            await connected(self._nc, timeout=self._timeout, url=self._url)
            first = await leader_first(
                self._nc, self._names.events_stream, subject, timeout=self._timeout, url=self._url
            )
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, f"reading run {run_id}", err) from err
        return first is None


def _cutoff(older_than: float) -> float:
    """The latest end a cleanup or archive of runs ended ``older_than`` seconds ago takes: 0
    takes every ended run, even one the server stamped a moment "ahead" of this clock."""
    return float("inf") if older_than <= 0 else time.time() - older_than


def _refs(data: dict[str, Any]) -> list[dict[str, Any]]:
    """An event's references."""
    found = (data.get(key) for key in PAYLOAD_KEYS)
    return [r for r in found if isinstance(r, dict) and is_ref(r)]


def _is_index(body: dict[str, Any]) -> bool:
    """Whether an archive message is the index ``_archive`` writes after a run's chunks."""
    return "index" in body and "messages" not in body


def _index_of(run_id: str, msg: StoredMsg) -> list[tuple[int, int, int]] | None:
    """The index an archive message holds: (first event, last event, stream sequence) of
    each chunk, in order. None when the message is not an index (a chunk: the archive was
    written by older code). An index that does not read is ``CorruptLogError``."""
    try:
        body = entries.loads_object(msg.data)
        if not _is_index(body):
            return None
        rows: list[tuple[int, int, int]] = []
        for row in entries.field(body, "index", list):
            if not isinstance(row, list) or len(row) != 3:
                raise entries.Unreadable(f"a row is not [first, last, sequence]: {row!r}"[:80])
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in row):
                raise entries.Unreadable(f"a row holds other than integers: {row!r}"[:80])
            rows.append((row[0], row[1], row[2]))
    except entries.Unreadable as err:
        raise CorruptLogError(
            run_id, msg.seq, f"the archive's index does not read: {err}"
        ) from None
    # Anyone can publish on the subject: the index must name the run's events from 1 on, each
    # once, in chunks stored before it, each chunk once, or it is not one the archive wrote
    # (checked before any chunk is read: a direct get of a sequence the server cannot hold is
    # refused as a bad request, and an index naming one chunk many times reads it as often).
    # Not in the order of their sequences: a pass that finishes an interrupted one may store
    # some chunks anew and find others kept (deduplicated) under their first sequence.
    if not rows:
        raise CorruptLogError(run_id, msg.seq, "the archive's index names no events")
    expected, chunks = 1, set()
    for first, last, seq in rows:
        if first != expected or last < first or not 0 < seq < msg.seq or seq in chunks:
            why = (
                f"the archive's index names events {first} to {last} in chunk {seq}, where "
                f"events from {expected} in another chunk stored before it were expected"
            )
            raise CorruptLogError(run_id, msg.seq, why[:200])
        expected = last + 1
        chunks.add(seq)
    return rows


def _chunk_events(run_id: str, msg: StoredMsg) -> list[list[Event]]:
    """The events of each copy an archive chunk holds (none for an index), each copy
    decoded and checked as a live log's message is (its body and server time)."""
    out: list[list[Event]] = []
    try:
        body = entries.loads_object(msg.data)
        if _is_index(body):
            return []
        for copy in entries.field(body, "messages", list):
            stored = StoredMsg(
                msg.subject,
                int(copy["seq"]),
                dumps(copy["body"]),
                {"Nats-Time-Stamp": str(copy["time"])},
            )
            out.append(decode_entry(run_id, stored)[0])
    except (entries.Unreadable, TypeError, KeyError, ValueError) as err:
        why = f"the archive's copy does not read: {err!r}"[:200]
        raise CorruptLogError(run_id, msg.seq, why) from None
    return out


def _events_in(data: bytes) -> int:
    """How many events a message of a run's log holds (0 when it does not read)."""
    try:
        items = entries.loads_object(data).get("e")
    except entries.Unreadable:
        return 0
    return len(items) if isinstance(items, list) else 0


def _span(chunk: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The first and last event a chunk's copies hold; None when a copy is not a log's
    message (``_body`` kept its bytes as they were)."""
    bodies = [copy["body"] for copy in chunk]
    if not all(isinstance(b, dict) and isinstance(b.get("s"), int) for b in bodies):
        return None
    if not all(isinstance(b.get("e"), list) and b["e"] for b in bodies):
        return None
    return int(bodies[0]["s"]), int(bodies[-1]["s"]) + len(bodies[-1]["e"]) - 1


def _body(data: bytes) -> Any:
    try:
        return entries.loads(data)
    except entries.Unreadable:
        return {"unreadable": base64.b64encode(data).decode()}


__all__ = ["Retention"]
