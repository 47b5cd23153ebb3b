"""The runs page and the counts by status on JetStream, read from the runs index
(``runs_index``) and checked against the runs' logs (``eventlog``): the index says which runs
and in what order, each row shown is read from its run's last message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from ..._core.events import RunStatus
from ...errors import WaylineError
from ...world import RunInfo
from ...world.ports.event_log import ALL
from .eventlog import EventLog
from .names import Names
from .runs_index import Entry, RunsIndex, top
from .runs_model import RunsModel

log = logging.getLogger(__name__)

_WRITES_AT_ONCE = 200
"""Entries a reconciliation writes at once (their publishes are pipelined)."""


async def _repair(what: str, write: Awaitable[object]) -> None:
    """A write that repairs the index (derived data) on a read: a failure is logged, never
    raised, so that the read (a console in read-only mode, a server that refuses writes for a
    moment) shows the runs as their logs have them; a later read repairs it."""
    try:
        await write
    except WaylineError as err:
        log.warning("runs index not repaired (%s): %s", what, err)


def _token(subject: str) -> str:
    return subject.rsplit(".", 1)[-1]


async def reconcile(log: EventLog, index: RunsIndex, names: Names) -> int:
    """Make the index name the runs the log holds, when ``needs_reconciling`` says so (see
    ``runs_index``): the entries of runs missing from it or named more than once are written
    from their last messages, those of runs that are gone purged. Runs are compared by their
    subject tokens, so that a run whose id is hashed there is reconciled as any other.
    Returns how many entries it wrote."""
    # every partition's events stream (``Names.part``): an index entry of a run in another
    # partition than the first is not an entry of a run that is gone
    parts = [names.partition(part) for part in range(log.partitions)]
    if not await index.needs_reconciling([p.events_stream for p in parts]):
        return 0
    runs = {
        _token(s) for p in parts for s in await index.subjects(p.events_stream, p.events_wildcard)
    }
    named: dict[str, list[str]] = {}
    for subject in await index.subjects(index.stream, f"{names.prefix}.ri.>"):
        named.setdefault(_token(subject), []).append(subject)
    gone = [s for token, found in named.items() if token not in runs for s in found]
    await _repair("runs gone", index.purge_subjects(gone))
    missing = [t for t in runs if len(named.get(t, ())) != 1]
    infos = await log.list_runs(None, None, ALL, run_ids=[], tokens=missing)
    readable = [i for i in infos if i.status is not RunStatus.CORRUPT]
    index.unindexed = len(infos) - len(readable)  # the index never holds a corrupt run
    for start in range(0, len(readable), _WRITES_AT_ONCE):
        chunk = readable[start : start + _WRITES_AT_ONCE]
        writes = [index.put(i, new=_token(index.subject(i)) not in named) for i in chunk]
        await asyncio.gather(*(_repair("reconciling", w) for w in writes))
    return len(readable)


async def page(
    log: EventLog,
    index: RunsIndex,
    names: Names,
    *,
    after: tuple[float, str] | None,
    limit: int,
    status: RunStatus | None,
    workflow: str | None,
) -> list[RunInfo]:
    """``EventLog.runs_page`` without search attributes, from the index (not for
    ``RunStatus.CORRUPT``, which only a run's log tells)."""
    await reconcile(log, index, names)
    named = await index.named(status, workflow)
    await index.resolve(named)
    out: list[RunInfo] = []
    shown: set[str] = set()  # a run named twice (a purge lost on the way) is shown once
    while len(out) < limit:
        chunk = top(named, after, limit - len(out), index.hashed)
        if not chunk:
            break
        after = (chunk[-1].created_at, chunk[-1].run_id)
        for info in await _checked(log, index, chunk, status, workflow):
            if info.run_id not in shown:
                shown.add(info.run_id)
                out.append(info)
    return out


async def _checked(
    log: EventLog,
    index: RunsIndex,
    chunk: list[Entry],
    status: RunStatus | None,
    workflow: str | None,
    dropped: Callable[[str], None] | None = None,
) -> list[RunInfo]:
    """The runs of ``chunk`` as their logs have them, in the index's order; an entry that
    disagrees with its log is written again (and its run left out when it no longer passes
    the filters), one whose run is gone purged (and ``dropped`` told its run id)."""
    gone: set[str] = set()

    def note(run_id: str, attributes: Mapping[str, Any] | None) -> None:
        if attributes is None:
            gone.add(run_id)

    read = await log.list_runs(None, None, ALL, run_ids=[e.run_id for e in chunk], checked=note)
    infos = {i.run_id: i for i in read}
    out: list[RunInfo] = []
    stale: list[Entry] = []
    for entry in chunk:
        info = infos.get(entry.run_id)
        if info is None or entry.run_id in gone:
            stale.append(entry)
            continue
        if info.status is RunStatus.CORRUPT:
            # its log does not read: shown in its place when no status is asked for, with the
            # index's time so that the cursor walks on past it
            if status is None:
                out.append(replace(info, created_at=entry.created_at))
            continue
        if not index.matches(entry, info):
            await _repair(f"run {info.run_id}", index.put(info))
            if (status is not None and info.status is not status) or (
                workflow is not None and info.workflow != workflow
            ):
                continue
            if info.created_at != entry.created_at:
                continue  # its place in the order moved: the next read finds it there
        out.append(info)
    await _repair("runs gone", index.purge(stale))
    if dropped is not None:
        for entry in stale:
            dropped(entry.run_id)
    return out


async def page_from_model(
    log: EventLog,
    index: RunsIndex,
    model: RunsModel,
    *,
    after: tuple[float, str] | None,
    limit: int,
    status: RunStatus | None,
    workflow: str | None,
) -> list[RunInfo]:
    """``page`` with the runs picked from the index held in memory (``runs_model``, caught
    up by the caller) instead of the index's names: each row is still read from its log."""

    async def pick(
        at: tuple[float, str] | None, count: int, status: RunStatus | None, workflow: str | None
    ) -> list[Entry]:
        return model.entries(at, count, status, workflow)

    picked = await page_picked(log, index, pick, model.drop, after, limit, status, workflow)
    assert picked is not None  # the model always picks
    return picked


Pick = Callable[
    [tuple[float, str] | None, int, RunStatus | None, str | None], Awaitable[list[Entry] | None]
]
"""The first runs past a cursor with a status and workflow, as an index in memory names
them (``RunsModel.entries``, ``RunsTail.entries``); None when it cannot tell."""


async def page_picked(
    log: EventLog,
    index: RunsIndex,
    pick: Pick,
    dropped: Callable[[str], None],
    after: tuple[float, str] | None,
    limit: int,
    status: RunStatus | None,
    workflow: str | None,
) -> list[RunInfo] | None:
    """``page`` with the runs named by ``pick`` (each row read from its log, a run found
    gone told to ``dropped``); None when ``pick`` cannot name them (the runs index's tail,
    ``runs_tail``, when the page lies deeper than it reads)."""
    out: list[RunInfo] = []
    while len(out) < limit:
        chunk = await pick(after, limit - len(out), status, workflow)
        if chunk is None:
            return None
        if not chunk:
            break
        after = (chunk[-1].created_at, chunk[-1].run_id)
        out += await _checked(log, index, chunk, status, workflow, dropped)
    return out


async def counts(
    log: EventLog, index: RunsIndex, names: Names, workflow: str | None
) -> dict[RunStatus, int]:
    await reconcile(log, index, names)
    return await index.counts(workflow)
