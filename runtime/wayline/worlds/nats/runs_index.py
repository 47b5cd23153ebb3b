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
  log by the writes under way), so a lost entry is back within that time;
- the counts are read from the index: a run whose status write was lost counts under its old
  status until a page shows it or it changes status again.
"""

from __future__ import annotations

import heapq
import json
import struct
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..._core.events import RunStatus
from ...errors import WorldError, WorldUnavailableError
from ...world import RunInfo
from .codec import wrap
from .names import Names, subject_token, token_value

RECONCILE_EVERY = 10.0
"""Seconds between two reconciliations of the index with the event log by one process while
their run counts differ: a reconciliation names every run (no message read), which costs a
few hundred milliseconds at 100,000 runs, and the counts differ for a moment at every start."""


def stream_name(names: Names) -> str:
    return f"{names.prefix}_runs"


def wildcard(names: Names) -> str:
    return f"{names.prefix}.ri.>"


def time_token(created_at: float) -> str:
    """``created_at`` as a subject token that sorts as the times do (non-negative times)."""
    return struct.pack(">d", max(0.0, created_at)).hex()


def time_of(token: str) -> float | None:
    try:
        value: float = struct.unpack(">d", bytes.fromhex(token))[0]
    except (ValueError, struct.error):
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


def entry_of(subject: str) -> Entry | None:
    """The entry a subject of the index names; None for one no writer of this version made."""
    parts = subject.split(".")
    if len(parts) < 6 or parts[-5] != "ri":
        return None
    status, workflow, created, run = parts[-4:]
    try:
        known = RunStatus(status)
    except ValueError:
        return None
    flow, run_id, at = token_value(workflow), token_value(run), time_of(created)
    if flow is None or run_id is None or at is None:
        return None
    return Entry(run_id, known, flow, at, subject)


def _created(subject: str) -> str:
    """The ``<created>`` token of a subject of the index: as a string, it sorts as the times
    do (``time_token``)."""
    end = subject.rindex(".")
    return subject[subject.rindex(".", 0, end) + 1 : end]


def top(subjects: Iterable[str], after: tuple[float, str] | None, count: int) -> list[Entry]:
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
            entry = entry_of(subject)
            if entry is not None and after is not None and entry.key > (-after[0], after[1]):
                level.append(entry)
    picked = heapq.nlargest(count, older, key=_created)
    if picked:  # every entry tied with the last one picked competes for the last places
        last = _created(picked[-1])
        picked += [s for s in older if _created(s) == last and s not in picked]
    decoded = (entry_of(s) for s in picked)
    found = level + [e for e in decoded if e is not None]
    return sorted(found, key=lambda e: e.key)[:count]


class RunsIndex:
    def __init__(self, nc: Any, js: Any, names: Names, *, url: str, timeout: float) -> None:
        self._nc, self._js, self._names = nc, js, names
        self._url, self._timeout = url, timeout
        self.stream = stream_name(names)
        self._reconciled_at = -RECONCILE_EVERY

    def subject(self, info: RunInfo) -> str:
        return (
            f"{self._names.prefix}.ri.{info.status}.{subject_token(info.workflow)}."
            f"{time_token(info.created_at)}.{subject_token(info.run_id)}"
        )

    def matches(self, entry: Entry, info: RunInfo) -> bool:
        """Whether ``entry`` names the run as ``info`` (read from its log) has it."""
        return entry.subject == self.subject(info)

    def _run_filter(self, run_id: str) -> str:
        return f"{self._names.prefix}.ri.*.*.*.{subject_token(run_id)}"

    async def put(self, info: RunInfo, *, new: bool = False) -> None:
        """Write the run's entry, acknowledged; unless the run is ``new`` (it has no entry),
        purge its other entries, keeping the one just written (the newest)."""
        try:
            await self._js.publish(self.subject(info), b"", stream=self.stream)
            if not new:
                await self._js.purge_stream(
                    self.stream, subject=self._run_filter(info.run_id), keep=1
                )
        except Exception as err:
            raise wrap(self._url, "writing the runs index", err) from err

    async def moved(self, info: RunInfo, before: RunInfo | None) -> None:
        """After an append that moved the run's status from ``before`` (None: a new run):
        write its new entry (acknowledged, so that a read made after the append finds it),
        then purge the entry ``before`` named with a request that waits for no reply. A purge
        lost on the way leaves the run named twice, which the next reconciliation finds (the
        index then names more runs than the log holds) and a page shows once; waiting for
        its reply would add a round trip to every status change of every run."""
        try:
            await self._js.publish(self.subject(info), b"", stream=self.stream)
            if before is not None:
                purge = json.dumps({"filter": self.subject(before)}).encode()
                await self._nc.publish(f"$JS.API.STREAM.PURGE.{self.stream}", purge)
        except Exception as err:
            raise wrap(self._url, "writing the runs index", err) from err

    async def forget_run(self, run_id: str) -> None:
        """Purge the entry of a run that was deleted or archived."""
        try:
            await self._js.purge_stream(self.stream, subject=self._run_filter(run_id))
        except Exception as err:
            raise wrap(self._url, "purging the runs index", err) from err

    async def named(self, status: RunStatus | None, workflow: str | None) -> list[str]:
        """The subjects of every run the index names with that status and workflow."""
        pattern = (
            f"{self._names.prefix}.ri.{status if status is not None else '*'}."
            f"{subject_token(workflow) if workflow is not None else '*'}.*.*"
        )
        return await self.subjects(self.stream, pattern)

    async def counts(self, workflow: str | None) -> dict[RunStatus, int]:
        """How many runs the index names under each status (the status token of each
        subject, with nothing else decoded: a hundred thousand names are counted at once)."""
        tally = Counter(s.rsplit(".", 4)[1] for s in await self.named(None, workflow))
        out: dict[RunStatus, int] = {}
        for token, count in tally.items():
            try:
                out[RunStatus(token)] = count
            except ValueError:  # a subject no writer of this version made
                continue
        return out

    async def needs_reconciling(self, events_stream: str) -> bool:
        """Whether the index names another number of runs than the event log holds, and no
        reconciliation ran in the last :data:`RECONCILE_EVERY` seconds (always when the index
        is empty and the log is not: a world provisioned before the index)."""
        runs, named = await self._num_subjects(events_stream), await self._num_subjects(self.stream)
        if runs == named:
            return False
        if named and time.monotonic() - self._reconciled_at < RECONCILE_EVERY:
            return False
        self._reconciled_at = time.monotonic()
        return True

    async def _num_subjects(self, stream: str) -> int:
        info = await self._info(stream, {})
        return int((info.get("state") or {}).get("num_subjects") or 0)

    async def subjects(self, stream: str, pattern: str) -> list[str]:
        """Every subject of ``stream`` under ``pattern``, from the stream's (paged) state."""
        subjects: list[str] = []
        while True:
            info = await self._info(stream, {"subjects_filter": pattern, "offset": len(subjects)})
            page = list((info.get("state") or {}).get("subjects") or {})
            subjects.extend(page)
            if not page or len(subjects) >= int(info.get("total") or 0):
                return subjects

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
        for entry in entries:
            try:
                await self._js.purge_stream(self.stream, subject=entry.subject)
            except Exception as err:
                raise wrap(self._url, "repairing the runs index", err) from err
