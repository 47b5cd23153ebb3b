"""The JetStream world's runs index: one empty message per run in the ``<prefix>_runs`` stream,
on ``<prefix>.ri.<status>.<workflow>.<created>.<run>``, so the runs page and the counts by
status read the subject names of one stream-info request and no run's log (docs/nats.md,
"The runs index"). ``<created>`` is the run's ``created_at`` as the 16 hex digits of its
IEEE 754 bits, which sort as the times do and give the cursor back exactly; the message's own
timestamp is when the run last changed status.

The log is the truth and the index is derived from it. An append that changes a run's status
writes the run's entry after it lands (then purges the entry of the old status), so a writer
that dies in between leaves an entry missing or naming an old status:

- a page reads the last message of each run it shows, as it always did, so a row never shows a
  stale status: one that disagrees with its log is written again (and left out of a page
  filtered by a status it no longer has), one whose run is gone is purged;
- when the index does not name as many runs as the event log holds (a lost write, a world
  provisioned before the index, runs deleted behind the world's back), the next read names the
  runs of both (subject names only), writes the entries of the runs missing from the index
  from their last messages and purges the entries of runs that are gone. It runs at most once
  per :data:`RECONCILE_EVERY` per process while runs are being created (the index trails the
  log by the writes under way), so a lost entry is back within that time; and every
  :data:`RECONCILE_ANYWAY` whatever the counts say, since a run named twice can hide a run
  not named;
- an entry's body carries the run's workflow and id (hashed in the subject past 120
  characters) and the log position its status was read at, so a repair from an older read
  never replaces a newer status (``RunsIndex.put``);
- anyone who can publish on the index's subjects can claim any log position in a body: a
  claim is believed only up to the run's log's last event (``RunsIndex.believed``), so a
  forged entry claiming a later one is purged by a repair rather than the real entry, and
  loses to the real entry in a reader's model (``runs_model``);
- repairs made by a read are best-effort: a failed one is logged and the read goes on;
- the counts are read from the index: a run whose status write was lost counts under its old
  status until a page shows it or it changes status again.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import math
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nats.js.errors

from ..._core.events import RunStatus
from ...errors import WorldError, WorldUnavailableError
from ...world import RunInfo
from .codec import wrap
from .direct import direct_batch
from .names import Names, subject_token, token_value

log = logging.getLogger(__name__)

RECONCILE_EVERY = 10.0
"""Seconds between two reconciliations of the index with the event log by one process while
their run counts differ: a reconciliation names every run (no message read), which costs a
few hundred milliseconds at 100,000 runs, and the counts differ for a moment at every start."""

RECONCILE_ANYWAY = 60.0
"""Seconds after which one process reconciles the index with the log even when their counts
agree: a run named twice (a lost purge) and a run not named (a lost write) give equal counts,
so only a reconciliation finds the second; one per minute per process bounds both its cost
and how long a lost entry stays lost."""


def stream_name(names: Names) -> str:
    return f"{names.prefix}_runs"


def wildcard(names: Names) -> str:
    return f"{names.prefix}.ri.>"


def time_token(created_at: float) -> str:
    """``created_at`` as a subject token that sorts as the times do (non-negative times)."""
    return struct.pack(">d", max(0.0, created_at)).hex()


def time_of(token: str) -> float | None:
    """The time a ``<created>`` token gives back; None for a token no writer made
    (``time_token`` writes finite times with the sign bit clear): a NaN, an infinity or a
    negative time would break the runs' order, which sorts by it."""
    try:
        value: float = struct.unpack(">d", bytes.fromhex(token))[0]
    except (ValueError, struct.error):
        return None
    if not math.isfinite(value) or math.copysign(1.0, value) < 0:
        return None
    return value


@dataclass(frozen=True, slots=True)
class Entry:
    """One run as the index names it."""

    run_id: str
    status: RunStatus
    workflow: str
    created_at: float
    subject: str

    @property
    def key(self) -> tuple[float, str]:
        """The run's place in the runs' order (newest first, then by run id)."""
        return (-self.created_at, self.run_id)


_STATUSES = {status.value: status for status in RunStatus}
"""The statuses by their subject token: a dict's lookup, where ``RunStatus(token)`` costs
several times more, and a load from the index's names parses 100,000 of them."""


def entry_of(subject: str, hashed: Mapping[str, tuple[str, str]] | None = None) -> Entry | None:
    """The entry a subject of the index names; None for one no writer of this version made.
    A workflow or run id too long for a subject token is hashed there (``names``), and is
    read from the entry's body: ``hashed`` maps such subjects to their (workflow, run id)
    (``RunsIndex.resolve``); one it does not hold gives None."""
    found = named(subject, hashed)
    return None if found is None else Entry(*found, subject)


def named(
    subject: str, hashed: Mapping[str, tuple[str, str]] | None = None
) -> tuple[str, RunStatus, str, float] | None:
    """What :func:`entry_of` gives, as (run id, status, workflow, created at), without the
    ``Entry`` made: a load from the index's names reads 100,000 of them."""
    parts = subject.split(".")
    if len(parts) < 6 or parts[-5] != "ri":
        return None
    status, workflow, created, run = parts[-4:]
    known = _STATUSES.get(status)
    if known is None:
        return None
    flow, run_id, at = token_value(workflow), token_value(run), time_of(created)
    if (flow is None or run_id is None) and hashed is not None and subject in hashed:
        flow, run_id = hashed[subject]
    if flow is None or run_id is None or at is None:
        return None
    return run_id, known, flow, at


def _created(subject: str) -> str:
    """The ``<created>`` token of a subject of the index: as a string, it sorts as the times
    do (``time_token``)."""
    end = subject.rindex(".")
    return subject[subject.rindex(".", 0, end) + 1 : end]


def top(
    subjects: Iterable[str],
    after: tuple[float, str] | None,
    count: int,
    hashed: Mapping[str, tuple[str, str]] | None = None,
) -> list[Entry]:
    """The first ``count`` entries past ``after`` in the runs' order (newest first, then by
    run id), found by comparing the subjects' time tokens as strings: only the entries picked
    (and those sharing the last one's time or the cursor's) are decoded, so that a page among
    a hundred thousand names costs one pass over them, not a sort of decoded entries."""
    mark = None if after is None else time_token(after[0])
    level: list[Entry] = []  # entries at the cursor's own time, past it by run id
    older: list[str] = []
    for subject in subjects:
        created = _created(subject)
        if mark is None or created < mark:
            older.append(subject)
        elif created == mark:
            entry = entry_of(subject, hashed)
            if entry is not None and after is not None and entry.key > (-after[0], after[1]):
                level.append(entry)
    picked = heapq.nlargest(count, older, key=_created)
    if picked:  # every entry tied with the last one picked competes for the last places
        last = _created(picked[-1])
        picked += [s for s in older if _created(s) == last and s not in picked]
    decoded = (entry_of(s, hashed) for s in picked)
    found = level + [e for e in decoded if e is not None]
    return sorted(found, key=lambda e: e.key)[:count]


def body(info: RunInfo) -> bytes:
    """An entry's body: what its subject may hash (the workflow and run id) and the log
    position its status was read at, which orders two writes of one run's entry."""
    fields = {"workflow": info.workflow, "run": info.run_id, "seq": info.last_seq}
    return json.dumps(fields).encode()


def claimed(body: Mapping[str, Any]) -> int:
    """The log position an entry's decoded body claims; 0 for none, or for one that is no
    integer (bytes anyone may store): no claim then outranks anything."""
    seq = body.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


LogInfo = Callable[[str], Awaitable[RunInfo | None]]
"""A run as its log has it now (None when it has no log): what an entry's claim is checked
against (``RunsIndex.believed``)."""


def _hashed(subject: str) -> bool:
    parts = subject.rsplit(".", 4)
    return len(parts) == 5 and (parts[2].startswith("=h") or parts[4].startswith("=h"))


class RunsIndex:
    def __init__(
        self,
        nc: Any,
        js: Any,
        names: Names,
        *,
        url: str,
        timeout: float,
        log_info: LogInfo | None = None,
    ) -> None:
        self._nc, self._js, self._names = nc, js, names
        self.log_info = log_info
        """The run as its log has it, read only when an entry's claimed log position is in
        doubt (``believed``); without it every claim is believed."""
        self._url, self._timeout = url, timeout
        self.stream = stream_name(names)
        self._reconciled_at = -RECONCILE_EVERY
        self.swept_at = time.monotonic()
        """When this process last reconciled whatever the counts said (or started)."""
        self.unindexed = 0
        """Runs of the log the index does not hold (corrupt runs), as the last
        reconciliation found them: the comparison of the counts leaves them out."""
        self.hashed: dict[str, tuple[str, str]] = {}
        """The (workflow, run id) of each hashed subject read so far: a subject names one run
        for good, so this never goes stale (it holds only runs with names over 120
        characters)."""

    @property
    def names(self) -> Names:
        return self._names

    def subject(self, info: RunInfo) -> str:
        return self.subject_of(info.status, info.workflow, info.created_at, info.run_id)

    def subject_of(self, status: RunStatus, workflow: str, created_at: float, run_id: str) -> str:
        return (
            f"{self._names.prefix}.ri.{status}.{subject_token(workflow)}."
            f"{time_token(created_at)}.{subject_token(run_id)}"
        )

    def matches(self, entry: Entry, info: RunInfo) -> bool:
        """Whether ``entry`` names the run as ``info`` (read from its log) has it."""
        return entry.subject == self.subject(info)

    def _run_filter(self, run_id: str) -> str:
        return f"{self._names.prefix}.ri.*.*.*.{subject_token(run_id)}"

    def _statuses_filter(self, info: RunInfo) -> str:
        """The run's entries under any status: only the status token is a wildcard, since
        a run's workflow and creation time never change."""
        return (
            f"{self._names.prefix}.ri.*.{subject_token(info.workflow)}."
            f"{time_token(info.created_at)}.{subject_token(info.run_id)}"
        )

    async def resolve(self, subjects: Iterable[str]) -> None:
        """Read the body of each hashed subject not read yet (``entry_of``)."""
        for subject in subjects:
            if subject in self.hashed or not _hashed(subject):
                continue
            found = await self._body(subject)
            if found is not None:
                self.hashed[subject] = (str(found["workflow"]), str(found["run"]))

    async def _body(self, subject: str) -> dict[str, Any] | None:
        """The body of the last entry on ``subject``; None when it has none, or one written
        before entries had bodies."""
        try:
            msg = await self._js.get_last_msg(self.stream, subject)
        except nats.js.errors.NotFoundError:
            return None
        except Exception as err:
            raise wrap(self._url, "reading the runs index", err) from err
        try:
            found = json.loads(msg.data or b"null")
        except (ValueError, RecursionError):  # bytes anyone may store, nested past the stack
            return None
        return found if isinstance(found, dict) and "run" in found else None

    async def put(self, info: RunInfo, *, new: bool = False) -> None:
        """Write the run's entry, acknowledged; unless the run is ``new`` (it has no entry),
        then purge its other entries, older than the one just written, unless one of them
        was read at a later log position than ``info`` (a writer that saw a newer status):
        then the entry just written is the stale one and is purged instead. An older log
        position never replaces a newer one; a writer that lands after this one purges this
        entry itself (``moved``)."""
        try:
            ack = await self._js.publish(self.subject(info), body(info), stream=self.stream)
            if new:
                return
            mine = self.subject(info)
            listed = await self.subjects(self.stream, self._statuses_filter(info))
            others = [s for s in listed if s != mine]
            newer = False
            for other in others:
                found = await self._body(other)
                claim = 0 if found is None else claimed(found)
                if claim > info.last_seq and await self.believed(info.run_id, claim):
                    newer = True
            if newer:  # keep the newer entry: purge this one (and older ones on its subject)
                await self._js.purge_stream(self.stream, subject=mine, seq=ack.seq + 1)
                return
            for other in others:
                await self._js.purge_stream(self.stream, subject=other, seq=ack.seq)
        except WorldError:
            raise
        except Exception as err:
            raise wrap(self._url, "writing the runs index", err) from err

    async def believed(self, run_id: str, claim: int) -> bool:
        """Whether an entry of ``run_id`` may have been read at log position ``claim``: not
        past the log's last event as read now (a log only grows, and an entry is written
        after the read it names). A claim past it was forged (issue #37): believing it would
        keep a forged status for good and purge the real entry. One read of the run's log,
        made only when two entries of a run disagree (never on a step's path)."""
        if self.log_info is None:
            return True
        info = await self.log_info(run_id)
        return info is None or claim <= info.last_seq

    async def moved(self, info: RunInfo, old: Sequence[str] = ()) -> None:
        """Write the run's entry (acknowledged), then purge the subjects of its ``old``
        statuses with requests that wait for no reply (``runs_writer`` calls this off the
        append's path). Each purge names an exact subject and removes only messages older
        than the entry just written (its ``seq`` bound), so it cannot take a later entry under
        the same status (a run that goes running, paused, running again) however late it
        lands. A purge lost on the way leaves the run named twice, which a reconciliation
        finds and a page shows once."""
        try:
            ack = await self._js.publish(self.subject(info), body(info), stream=self.stream)
            for subject in dict.fromkeys(old):
                purge = json.dumps({"filter": subject, "seq": ack.seq}).encode()
                await self._nc.publish(f"$JS.API.STREAM.PURGE.{self.stream}", purge)
        except Exception as err:
            raise wrap(self._url, "writing the runs index", err) from err

    async def forget_run(self, run_id: str, info: RunInfo | None = None) -> None:
        """Purge the entries of a run that was deleted or archived. With the run's ``info``
        the filter is a wildcard on the status token only, which the server matches as
        cheaply as an exact subject: 1,000 such purges in a 10,000-run index took 0.15 to
        0.21 s against 0.94 to 1.36 s for ``*.*.*.<run>`` (on a loaded machine)."""
        pattern = self._run_filter(run_id) if info is None else self._statuses_filter(info)
        try:
            await self._js.purge_stream(self.stream, subject=pattern)
        except Exception as err:
            raise wrap(self._url, "purging the runs index", err) from err

    async def named(self, status: RunStatus | None, workflow: str | None) -> list[str]:
        """The subjects of every run the index names with that status and workflow."""
        return await self.subjects(self.stream, self.filter(status, workflow))

    async def counts(self, workflow: str | None) -> dict[RunStatus, int]:
        """How many runs the index names under each status: one count per status, asked
        together, in which the server counts the subjects and sends none of them. Listing
        the names to count them (one stream-info answer of 9.2 MB at 100,000 runs) took 1.2
        to 2.8 s there; these counts take milliseconds (bench/RESULTS.md, "A console's first
        call with the counts of the runs index's stream")."""
        statuses = [s for s in RunStatus if s is not RunStatus.CORRUPT]
        found = await asyncio.gather(*(self.count(self.filter(s, workflow)) for s in statuses))
        return {status: n for status, n in zip(statuses, found, strict=True) if n}

    def filter(self, status: RunStatus | None, workflow: str | None) -> str:
        """The subjects of the runs the index names with that status and workflow (any, for
        None)."""
        return (
            f"{self._names.prefix}.ri.{status if status is not None else '*'}."
            f"{subject_token(workflow) if workflow is not None else '*'}.*.*"
        )

    async def count(self, pattern: str) -> int:
        """How many entries are under ``pattern``: the first one and the server's count of
        the matches a batch direct get of one message leaves pending, so no name is sent. The
        stream keeps one message per subject, so this is how many subjects, and so runs'
        names, the pattern matches: what a listing of the names counts."""
        msgs, pending = await direct_batch(
            self._nc,
            self.stream,
            {"seq": 0, "next_by_subj": pattern, "batch": 1},
            timeout=self._timeout,
            url=self._url,
        )
        return len(msgs) + pending

    async def needs_reconciling(self, events_streams: str | list[str]) -> bool:
        """Whether to reconcile the index with the log now: when the index names another
        number of runs than the log holds (less the corrupt runs it never holds) and no
        reconciliation ran in the last :data:`RECONCILE_EVERY` seconds (always when the index
        is empty and the log is not: a world provisioned before the index), and in any case
        when none ran in the last :data:`RECONCILE_ANYWAY` seconds (equal counts can hide a
        lost write behind a lost purge)."""
        now = time.monotonic()
        if now - self.swept_at >= RECONCILE_ANYWAY:
            self._reconciled_at = self.swept_at = now
            return True
        streams = [events_streams] if isinstance(events_streams, str) else events_streams
        runs = sum([await self._num_subjects(stream) for stream in streams])
        named = await self._num_subjects(self.stream)
        if runs - self.unindexed == named:
            return False
        if named and now - self._reconciled_at < RECONCILE_EVERY:
            return False
        self._reconciled_at = now
        return True

    async def state(self) -> dict[str, Any]:
        """The index stream's state (its first and last sequences, its number of subjects)
        and, as ``created``, when the stream was made (a stream deleted and made again
        numbers its messages from 1 again)."""
        info = await self._info(self.stream, {})
        return {**(info.get("state") or {}), "created": info.get("created")}

    async def _num_subjects(self, stream: str) -> int:
        info = await self._info(stream, {})
        return int((info.get("state") or {}).get("num_subjects") or 0)

    async def subjects(self, stream: str, pattern: str) -> list[str]:
        """Every subject of ``stream`` under ``pattern``, from the stream's (paged) state."""
        return (await self.listed(stream, pattern))[0]

    async def listed(self, stream: str, pattern: str) -> tuple[list[str], int]:
        """Every subject of ``stream`` under ``pattern`` and how many pages of the stream's
        state gave them: pages read while subjects come and go may miss one (a subject taken
        out before the next page's offset moves the rest back by one)."""
        subjects: list[str] = []
        pages = 0
        while True:
            info = await self._info(stream, {"subjects_filter": pattern, "offset": len(subjects)})
            page = list((info.get("state") or {}).get("subjects") or {})
            pages += 1
            subjects.extend(page)
            if not page or len(subjects) >= int(info.get("total") or 0):
                return subjects, pages

    async def _info(self, stream: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = await self._nc.request(
                f"$JS.API.STREAM.INFO.{stream}", json.dumps(request).encode(), timeout=self._timeout
            )
        except Exception as err:
            raise wrap(self._url, "reading the runs index", err) from err
        info: dict[str, Any] = json.loads(resp.data)
        if "error" in info:
            error = info["error"]
            unavailable = isinstance(error, dict) and error.get("code") == 503
            kind = WorldUnavailableError if unavailable else WorldError
            raise kind(f"NATS at {self._url}: runs index: {error}")
        return info

    async def purge(self, entries: Iterable[Entry]) -> None:
        """Purge the entries of runs that are gone (a run's log, once gone, is not written
        again under its id)."""
        await self.purge_subjects(e.subject for e in entries)

    async def purge_subjects(self, subjects: Iterable[str]) -> None:
        """Purge exact subjects of the index."""
        for subject in subjects:
            try:
                await self._js.purge_stream(self.stream, subject=subject)
            except Exception as err:
                raise wrap(self._url, "repairing the runs index", err) from err
