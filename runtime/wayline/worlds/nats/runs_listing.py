"""Listing the runs of a NATS world: pages and counts, from the runs index held in memory
(``runs_model``) when it is followed, from the index's newest entries while it loads
(``runs_tail``), else from the runs index's stream (``runs_pages``); a
filter on search attributes is narrowed by the attribute index (``attribute_index``). The
indexes' writes that go with an append are here too (``runs_writer``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..._core import search_attributes
from ..._core.events import RunStatus
from ..._core.search_attributes import Where
from ...errors import WaylineError, WorldUnavailableError
from ...world import RunInfo
from . import runs_pages
from .attribute_index import AttributeIndex
from .connection import Link
from .eventlog import EventLog
from .names import Names
from .runs_index import RunsIndex
from .runs_model import RunsModel
from .runs_tail import RunsTail
from .runs_writer import RunsWriter

log = logging.getLogger("wayline.worlds.nats")


class NatsRunsListing:
    def __init__(
        self,
        link: Link,
        events: Callable[[], EventLog],
        names: Names,
        now: Callable[[], float],
        base_count: Callable[..., Awaitable[dict[RunStatus, int]]],
    ) -> None:
        self._nc = link.nc
        self._js = link.js
        self._log = link.log
        self._events = events
        """The started world's event log, or its not-started error."""
        self._names = names
        self._now = now
        self._base_count = base_count
        """``World.count_runs``: the counts read from the runs a list names."""
        self._url = link.url
        self._servers_shown = link.shown
        self._timeout = link.timeout
        self._attributes: AttributeIndex | None = None
        self._runs_index: RunsIndex | None = None
        self._runs_writer: RunsWriter | None = None
        self.model: RunsModel | None = None
        """The runs index held in memory, once ``follow_runs`` was called."""
        self._tail: RunsTail | None = None
        """The index's newest entries, read while the model loads (``runs_tail``)."""
        self._uncounted: RunsModel | None = None
        """The model during whose load the index's counts by status failed: the counts are
        then the load's so far, marked partial (``runs_loading``), until it is loaded."""

    async def close(self, connected: Callable[[], bool], grace: float) -> None:
        """Stop the runs in memory and give the writer ``grace`` seconds (none when the
        connection is gone) to write what is noted; the indexes are made again on a start."""
        model, self.model = self.model, None
        self._tail = self._uncounted = None
        if model is not None:
            await model.close()
        writer, self._runs_writer = self._runs_writer, None
        if writer is not None and connected():
            # a short wait: a close does not wait out requests that get no answer (the
            # in-flight ones fail at once below), and what is left unwritten is repaired
            # from the log by the index's readers
            await writer.close(grace)
        elif writer is not None:
            await writer.close(0)
        self._attributes = None
        self._runs_index = None

    async def forget_run(self, run_id: str, info: RunInfo) -> None:
        """A deleted or archived run leaves both indexes and the runs in memory."""
        await self.index().forget_run(run_id)
        await self.runs().forget_run(run_id, info)
        self.forgotten(run_id)

    async def note_status(self, info: RunInfo, before: RunInfo | None, *, new: bool) -> None:
        """Note the run's new status for the runs index's writer (``runs_writer``), which
        writes its entry off the append's path: the append has landed and does not wait for
        the index, which is repaired from the log when a write is lost (see ``runs_index``)."""
        try:
            self.writer().note(info, None if new else before, new=new)
        except WaylineError as err:
            log.warning("run %s: runs index not written: %s", info.run_id, err)

    async def renew_index(self, run_id: str, values: Mapping[str, Any]) -> None:
        """The entries' second publish. The append has landed: a failure here is logged,
        not raised (the caller must not take the append for failed), and costs only the
        protection the renewal gives against a purge (see ``attribute_index``)."""
        try:
            await self.index().write(run_id, values)
        except WaylineError as err:
            log.warning("run %s: search attribute index not renewed: %s", run_id, err)

    def index(self) -> AttributeIndex:
        if self._attributes is None:
            self._attributes = AttributeIndex(*self._index_parts(), **self._index_options())
        return self._attributes

    def _index_parts(self) -> tuple[Any, Any, Names]:
        """What an index of the runs (``attribute_index``, ``runs_index``) is made of."""
        nc = self._nc()
        if self._log() is None or nc is None:
            raise WorldUnavailableError(f"world {self._url} is not started (use `async with`)")
        return nc, self._js(), self._names

    def _index_options(self) -> dict[str, Any]:
        return {"url": self._servers_shown, "timeout": self._timeout}

    def runs(self) -> RunsIndex:
        if self._runs_index is None:
            self._runs_index = RunsIndex(
                *self._index_parts(), **self._index_options(), log_info=self._log_info
            )
        return self._runs_index

    async def _log_info(self, run_id: str) -> RunInfo | None:
        """The run as its log has it now (``RunsIndex.believed``)."""
        return await self._events().get_run(run_id)

    def writer(self) -> RunsWriter:
        if self._runs_writer is None:
            self._runs_writer = RunsWriter(self.runs())
        return self._runs_writer

    async def _own_writes(self) -> None:
        """A read of the runs index waits (bounded) for this process's own entries: a
        process sees the statuses it wrote, as it did when the append waited for them."""
        await self.flush_runs_index(self._timeout)

    async def flush_runs_index(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds until this process's runs index entries are written
        (``runs_writer``); False when some are still waiting."""
        return self._runs_writer is None or await self._runs_writer.flush(timeout)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        return await self._list(status, workflow, limit, where, since, None)

    async def runs_mark(self) -> int | None:
        # one stream info, where listing the runs reads the last entry of every run
        return await self._events().last_appended()

    async def follow_runs(self) -> None:
        if self.model is None:
            self.model = RunsModel(self._index_parts()[0], self.runs(), **self._index_options())
        self.model.start()

    async def runs_followed(self, timeout: float) -> RunsModel | None:
        """The runs index held in memory (``follow_runs``) once loaded, waiting up to
        ``timeout`` seconds for its load; None when not followed or not loaded."""
        model = self.model
        if model is None or not await model.ready(timeout):
            return None
        return model

    def forgotten(self, run_id: str) -> None:
        if self.model is not None:
            self.model.drop(run_id)
        if self._tail is not None:
            self._tail.drop(run_id)

    def runs_loading(self) -> bool:
        """Whether the counts may be partial: the runs are followed and still loading, no
        load failed so far, and the index's counts by status failed during this load, so the
        counts are those of the entries the load has read (``count_runs``)."""
        model = self.model
        return (
            model is not None and not model.loaded and not model.failed and self._uncounted is model
        )

    async def _followed(self) -> RunsModel | None:
        """The runs index in memory, caught up with the index's stream, when it is loaded;
        None while it loads (or when its load failed: it is started again), and the read lists
        the index's names as before. Its upkeep (the index's reconciliation with the log,
        sweeps) is started off the read's path."""
        model = self.model
        if model is None:
            return None
        if not model.loaded:
            # a console's first calls do not wait for its load (11 to 22 s at 100,000 runs):
            # a page is read from the index's newest entries (``_tail_page``), the counts
            # from what the load has read so far (``count_runs``)
            model.start()
            return None
        self._tail = None
        await model.catch_up()
        events, index, names = self._events(), self.runs(), self._names
        model.upkeep(lambda: runs_pages.reconcile(events, index, names))
        return model

    async def runs_page(
        self,
        *,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None = None,
        workflow: str | None = None,
        where: Sequence[Where] = (),
    ) -> list[RunInfo]:
        if where and status is not RunStatus.CORRUPT:
            await self._own_writes()
            model = await self._followed()
            if model is not None:
                return await self._where_page(model, after, limit, status, workflow, where)
        if where or status is RunStatus.CORRUPT:
            # the attribute index names the candidates (a few); only a log says it is corrupt
            return await self._list(status, workflow, limit, where, None, after)
        await self._own_writes()
        model = await self._followed()
        if model is not None:
            return await runs_pages.page_from_model(
                self._events(),
                self.runs(),
                model,
                after=after,
                limit=limit,
                status=status,
                workflow=workflow,
            )
        if self.model is not None:  # followed, still loading
            tailed = await self._tail_page(after, limit, status, workflow)
            if tailed is not None:
                return tailed
        return await runs_pages.page(
            self._events(),
            self.runs(),
            self._names,
            after=after,
            limit=limit,
            status=status,
            workflow=workflow,
        )

    async def count_runs(
        self, *, workflow: str | None = None, where: Sequence[Where] = ()
    ) -> dict[RunStatus, int]:
        if where and all(w.op == "=" for w in where):
            await self._own_writes()
            model = await self._followed()
            if model is not None:  # "=" names its runs exactly: counted by the model
                run_ids, _ = await self._attribute_hits(where)
                return model.counts_of(run_ids, workflow)
        if where:  # the attribute index narrows the runs first, as for a list
            return await self._base_count(workflow=workflow, where=where)
        await self._own_writes()
        model = await self._followed()
        if model is not None:
            return model.counts(workflow)
        loading = self.model
        if loading is not None and not loading.failed:  # the model loads
            if self._uncounted is loading:  # what the load has read so far, marked partial
                return loading.counts(workflow)
            try:
                # counted by the server, no name sent: the loaded model's counts but for a
                # run named twice for a moment (its old entry's purge on its way), which
                # a listing of the names counted twice too. The load waits meanwhile, as it
                # does for a page from the tail.
                async with loading.paused():
                    return await self.runs().counts(workflow)
            except WaylineError as err:
                # the load's so far, marked partial from now on (``runs_loading``) until it
                # is loaded: the server that did not answer this count is not asked again
                log.warning("runs counted from the runs loaded so far: %s", err)
                self._uncounted = loading
                return loading.counts(workflow)
        return await runs_pages.counts(self._events(), self.runs(), self._names, workflow)

    async def _tail_page(
        self,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None,
        workflow: str | None,
    ) -> list[RunInfo] | None:
        """A page read from the index's newest entries while the model loads (``runs_tail``);
        None when the page lies deeper than the tail reads (kept for the next page), or the
        tail could not be read: the page then reads the index's names, as before the model."""
        if self._tail is None:
            self._tail = RunsTail(self._index_parts()[0], self.runs(), **self._index_options())
        tail = self._tail
        model = self.model
        assert model is not None  # called while the model loads
        try:
            async with model.paused():
                found = await runs_pages.page_picked(
                    self._events(),
                    self.runs(),
                    tail.entries,
                    tail.drop,
                    after,
                    limit,
                    status,
                    workflow,
                )
            # the walk's end, with the whole stream read (at most MOST entries): the index may
            # miss runs of the log (its stream purged, a write lost), which the names' page
            # reconciles before it lists; when this reconciliation writes entries, the page is
            # read from the names, the repaired index's
            ended = found is not None and len(found) < limit and tail.bound is None
            if ended and await runs_pages.reconcile(self._events(), self.runs(), self._names):
                found = None
                self._tail = None
        except WaylineError as err:
            log.warning("runs page not read from the runs index's newest entries: %s", err)
            found = None
            if self._tail is tail:
                self._tail = None  # read again from the stream's end at the next page
        return found

    async def _list(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        where: Sequence[Where],
        since: float | None,
        after: tuple[float, str] | None,
    ) -> list[RunInfo]:
        if not where:
            return await self._events().list_runs(status, workflow, limit, since=since, after=after)
        run_ids, entries = await self._attribute_hits(where)
        return await self._read_hits(status, workflow, limit, where, since, after, run_ids, entries)

    async def _attribute_hits(
        self, where: Sequence[Where]
    ) -> tuple[set[str], dict[str, list[tuple[str, Any]]]]:
        """The runs the attribute index names for ``where``, each with the entries that named
        it. Every "=" names its runs exactly; an order or "!=" names every run holding the
        key, so it only narrows the candidates when no "=" is given."""
        index = self.index()
        exact = [w for w in where if w.op == "="] or [where[0]]
        found = await asyncio.gather(*(index.candidates(w) for w in exact))
        run_ids = set(found[0]).intersection(*found[1:])
        entries = {run_id: [e for f in found for e in f[run_id]] for run_id in run_ids}
        return run_ids, entries

    async def _where_page(
        self,
        model: RunsModel,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None,
        workflow: str | None,
        where: Sequence[Where],
    ) -> list[RunInfo]:
        """A page filtered by search attributes with the runs index in memory: the attribute
        index names the candidates, the model orders them and cuts them past the cursor, and
        only the page's runs are read from their logs (and judged against ``where`` there)."""
        run_ids, entries = await self._attribute_hits(where)
        keys = model.keys_of(run_ids, after, status, workflow)
        out: list[RunInfo] = []
        at = 0
        while len(out) < limit and at < len(keys):
            chunk = [run_id for _, run_id in keys[at : at + limit - len(out)]]
            at += len(chunk)
            out += await self._read_hits(
                status, workflow, len(chunk), where, None, None, set(chunk), entries
            )
        return out

    async def _read_hits(
        self,
        status: RunStatus | None,
        workflow: str | None,
        limit: int,
        where: Sequence[Where],
        since: float | None,
        after: tuple[float, str] | None,
        run_ids: set[str],
        entries: Mapping[str, list[tuple[str, Any]]],
    ) -> list[RunInfo]:
        """The runs of ``run_ids`` that pass the filters as their logs have them; the
        attribute index's entries that disagree with a log are repaired."""
        index = self.index()
        stale: list[str] = []

        def checked(run_id: str, attributes: Mapping[str, Any] | None) -> None:
            held = search_attributes.stored(attributes or {})
            for subject, row in entries.get(run_id, ()):
                key = subject.rsplit(".", 3)[-3]
                if row not in search_attributes.index_rows(held.get(key)):
                    stale.append(subject)

        out = await self._events().list_runs(
            status,
            workflow,
            limit,
            since=since,
            where=where,
            run_ids=run_ids,
            checked=checked,
            after=after,
        )
        if stale:
            await index.repair(stale, self._now())
        return out
