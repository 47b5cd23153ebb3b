"""The runs index held in memory by a long-lived reader (the console): the runs page, its
filters by status and workflow, its cursor and the counts by status answered from a dict and a
sorted list instead of a listing of every name of the index at each call (docs/nats.md, "The
runs index's read model").

The model is loaded once by reading every message of the index's stream in order, in windows
of sequence numbers read concurrently (batch direct gets), and is then kept current by reading
what the stream holds past the last sequence it read, at each read (one direct get when
nothing changed), so a read sees every entry written before it, by any process. A run's
newest entry wins: the one read at the later log position (the ``seq`` of its body), then the
later in the stream, so a late repair from an older read never replaces a newer status. Where
the two orders disagree (an entry later in the stream loses to one claiming a later log
position), the winner's claim is checked against the run's log: anyone can publish a body
claiming any position, and a claim past the log's last event is not believed (issue #37).

Reading forward does not show what was purged. The runs this process deletes or archives are
dropped at once (``drop``), a run a page finds gone is dropped there, and a sweep drops the
runs whose entries another process purged: it lists the index's names, which costs seconds at
100,000 runs, so it runs in the background, when the index holds another number of names than
the model holds runs, at most once per :data:`SWEEP_EVERY`. Until then, the counts may still
count a run another process deleted.

A row a page shows is still read from its run's log (``runs_pages``), so a row never shows a
status its log does not have.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._core.events import RunStatus
from ...errors import CorruptLogError, WaylineError
from . import runs_index
from .direct import StoredMsg, direct_batch
from .runs_index import Entry, RunsIndex, entry_of, wildcard

log = logging.getLogger(__name__)

WINDOW = 1000
"""Messages one direct get reads while the model loads (sequence numbers a window covers)."""

WINDOWS_AT_ONCE = 8
"""Windows read concurrently while the model loads."""

UNREAD = -1
"""The log position of an entry the model took from the index's names (``Held.log_seq``):
not read, and lower than any read one, so an entry read later always outranks it, unless
:meth:`RunsModel._settle` reads the body first (a repair written late from an older read)."""

LAST_AT_ONCE = 256
"""Subjects whose last entries one direct get reads (``multi_last``) while the model loads
from the index's names or settles an entry it took from them."""

PLACED_ONE_BY_ONE = 100
"""Messages read at once past which the runs' order is sorted again rather than each run
inserted in it."""

QUIET = 0.05
"""Seconds the load waits, once no read holds it back (``paused``), before it goes on: the
console's runs call reads a page and then the counts, each held, and the load's next request
would otherwise be sent in between."""

DOUBTS_AT_ONCE = 64
"""Doubted runs (``Held.doubted``) one catch-up checks against their logs, one log read each:
forged entries stored by the thousand would otherwise hold every read behind thousands of log
reads; the rest wait for the next catch-ups."""

SWEEP_EVERY = 10.0
"""Seconds between two sweeps for runs purged by another process (``sweep``)."""

HOLD_FREE = 3.0
"""Seconds reads may hold a load back (``paused``) before :data:`HOLD_SHARE` applies: a
console's first page read from the index's newest entries took 1.1 to 2.1 s at 100,000 runs
on a loaded machine (bench/RESULTS.md), and goes wholly first."""

HOLD_SHARE = 0.5
"""The share of a load's time past :data:`HOLD_FREE` that reads may hold it back: reads that
overlap without end (several consoles, each reading its first page every second while the
counts are partial) would otherwise stop the load for good, and the counts would never be
exact. The time held is at most ``HOLD_FREE + HOLD_SHARE * (work + held)``, so at this share
a load that needs ``work`` seconds ends within ``2 * work + 2 * HOLD_FREE`` (bench/RESULTS.md,
"A runs model's load under page reads that never stop")."""


@dataclass(slots=True)
class Held:
    """What the model holds of one run: its newest entry."""

    status: RunStatus
    workflow: str
    created_at: float
    log_seq: int
    """The log position the entry's status was read at (0 for an entry without a body,
    :data:`UNREAD` for one taken from the index's names)."""
    stream_seq: int
    """The entry's sequence in the index's stream (0 for one taken from its names)."""

    def outranks(self, other: Held) -> bool:
        """Whether this entry of a run is newer than ``other``: read at a later log position,
        or at the same one and later in the stream."""
        return (self.log_seq, self.stream_seq) > (other.log_seq, other.stream_seq)

    def doubted(self, other: Held) -> bool:
        """Whether this entry outranks ``other`` only by its claimed log position, ``other``
        being the later in the stream: a real writer reads the log before it writes, so this
        happens only for a repair written late from an older read, or a forged claim."""
        return self.log_seq > other.log_seq and 0 < self.stream_seq < other.stream_seq


def newer(
    runs: Mapping[str, Held], msg: StoredMsg, within: str
) -> tuple[str, Held, Held | None] | None:
    """The run ``msg`` names, what it says of it, and the entry held for it in ``runs``
    (None when none is); None when the message names no run (``parse``), lies outside the
    index's subjects (``within``, their prefix: the stream is read without a subject filter,
    ``read_window``, and one configured by hand may hold other subjects) or is older than the
    entry held, an older status written late (``Held.outranks``)."""
    if not msg.subject.startswith(within):
        return None
    parsed = parse(msg)
    if parsed is None:
        return None
    run_id, new = parsed
    held = runs.get(run_id)
    if held is not None and held.outranks(new):
        return None
    return run_id, new, held


def unplace(keys: list[tuple[float, str]], key: tuple[float, str]) -> None:
    """Take ``key`` out of the sorted ``keys`` (a runs' order), if it is there."""
    at = bisect.bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]


async def read_last(
    nc: Any, index: RunsIndex, subjects: list[str], *, url: str, timeout: float
) -> list[StoredMsg]:
    """The last entry of each of ``subjects`` that holds one (direct gets of
    :data:`LAST_AT_ONCE` subjects each, sent together)."""
    chunks = [subjects[at : at + LAST_AT_ONCE] for at in range(0, len(subjects), LAST_AT_ONCE)]

    async def read(chunk: list[str]) -> list[StoredMsg]:
        request = {"multi_last": chunk, "batch": len(chunk)}
        msgs, _ = await direct_batch(nc, index.stream, request, timeout=timeout, url=url)
        return msgs

    found = await asyncio.gather(*(read(chunk) for chunk in chunks))
    return [msg for msgs in found for msg in msgs]


async def read_window(
    nc: Any, index: RunsIndex, start: int, batch: int, *, url: str, timeout: float
) -> list[StoredMsg]:
    """The index's entries from sequence ``start`` on, at most ``batch`` (one batch direct
    get). The request names no subject filter: the stream holds the index's subjects alone
    (``provision``), and a filter, although it matches every message, made the server count
    the messages left under it for each one it sent (``Nats-Num-Pending``): 100 to 130 ms of
    the server's CPU for 3,000 entries at 100,000 runs, against 10 to 60 ms without it
    (bench/RESULTS.md, "A NATS console's first call without the index's subject filter"). A
    message on another subject (a stream configured by hand) names no run and is skipped
    (``newer``)."""
    request = {"seq": start, "batch": batch}
    msgs, _ = await direct_batch(nc, index.stream, request, timeout=timeout, url=url)
    return msgs


def parse(msg: StoredMsg) -> tuple[str, Held] | None:
    """The run an index message names and what it says of it; None for a subject no writer
    of this version made (``runs_index.entry_of``). The body gives the log position, and the
    workflow and run id where the subject hashes them (past 120 characters)."""
    hashed = None
    if "=h" in msg.subject:
        try:
            found = json.loads(msg.data) if msg.data else None
        except (ValueError, RecursionError):  # bytes anyone may store, nested past the stack
            found = None
        if isinstance(found, dict) and "run" in found:
            hashed = {msg.subject: (str(found.get("workflow")), str(found["run"]))}
    entry = entry_of(msg.subject, hashed)
    if entry is None:
        return None
    held = Held(entry.status, entry.workflow, entry.created_at, _seq_of(msg.data), msg.seq)
    return entry.run_id, held


def _seq_of(data: bytes) -> int:
    """The ``seq`` of an entry's body (``runs_index.body``), read without decoding the rest:
    a load reads 100,000 of them. 0 for a body without one."""
    at = data.rfind(b'"seq": ')
    if at < 0:
        return 0
    end = data.find(b"}", at)
    try:
        return int(data[at + 7 : end if end >= 0 else None])
    except ValueError:
        return 0


class RunsModel:
    def __init__(self, nc: Any, index: RunsIndex, *, url: str, timeout: float) -> None:
        self._nc, self._index = nc, index
        self._url, self._timeout = url, timeout
        self._filter = wildcard(index.names)
        self._within = self._filter[:-1]  # the index's subjects' prefix, ``<prefix>.ri.``
        self.runs: dict[str, Held] = {}
        self.order: list[tuple[float, str]] = []
        """The runs' keys in the runs' order: ``(-created_at, run_id)``, sorted."""
        self._by_status: dict[RunStatus, list[tuple[float, str]]] = {}
        """The same, for the runs of each status."""
        self._counts: dict[str, Counter[RunStatus]] = {}
        """Runs by workflow and status."""
        self.seq = 0
        """The last sequence of the index's stream read."""
        self.loaded = False
        self.failed = False
        """Whether the last load failed (cleared when one succeeds): the counts are then read
        from the index's names, as before the model, rather than from the runs a load that
        may fail again has read (``NatsRunsListing.count_runs``)."""
        self.load_seconds: float | None = None
        self._reading = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self._swept_at = time.monotonic()
        self._closed = False
        self._pausing = 0
        self._clear = asyncio.Event()
        self._clear.set()
        """Set while no read pauses the load (``paused``)."""
        self._quiet = 0
        """How many reads have held the load so far (``paused``)."""
        self._began = 0.0
        """When the load under way began (``time.monotonic``)."""
        self._held = 0.0
        """Seconds the load under way was held back by reads, but for a hold under way."""
        self._holding = 0
        self._holding_since = 0.0
        """How many of the load's windows wait for reads, and since when one does."""
        self._made: object = None
        """When the index's stream the model read was made (its info's ``created``)."""
        self._doubted: set[str] = set()
        """Runs whose held entry outranked a later one only by its claimed log position
        (``Held.doubted``): the claim is checked against the log (``_believe``)."""
        self._dropped: set[str] | None = None
        """The runs dropped (``drop``) while a load is under way (None when none is): the
        load may have had their names or entries before this process purged them, and takes
        them out again at its end."""

    # --- what it holds ------------------------------------------------------------------
    def absorb(self, msg: StoredMsg, *, place: bool = True) -> None:
        """Take one message of the index's stream. Unless ``place``, the runs' orders are
        left to :meth:`replace` (many messages at once: one sort instead of an insertion
        each)."""
        self.seq = max(self.seq, msg.seq)
        found = newer(self.runs, msg, self._within)
        if found is not None:
            run_id, new, held = found
            if held is not None and new.doubted(held):
                self._doubted.add(run_id)
            self._take(run_id, new, held, place=place)
        elif msg.subject.startswith(self._within):
            parsed = parse(msg)  # beaten by the entry held (rare: checked, then parsed again)
            held = None if parsed is None else self.runs.get(parsed[0])
            if parsed is not None and held is not None and held.doubted(parsed[1]):
                self._doubted.add(parsed[0])

    def _take(self, run_id: str, new: Held, held: Held | None, *, place: bool) -> None:
        """Hold ``new`` for ``run_id`` in place of ``held`` (what was held for it)."""
        if held is not None:
            self._counts[held.workflow][held.status] -= 1
            if place and (held.created_at, held.status) != (new.created_at, new.status):
                self._unplace(run_id, held)
                self._place(run_id, new)
        elif place:
            self._place(run_id, new)
        self.runs[run_id] = new
        self._counts.setdefault(new.workflow, Counter())[new.status] += 1

    def absorb_all(self, msgs: list[StoredMsg]) -> None:
        """Take many messages: one at a time when they are few, else with one sort of the
        runs' orders (a run inserted at the head of a list of 100,000 moves all of them)."""
        if len(msgs) <= PLACED_ONE_BY_ONE:
            for msg in msgs:
                self.absorb(msg)
            return
        for msg in msgs:
            self.absorb(msg, place=False)
        self.replace()

    def replace(self) -> None:
        """Sort the runs' orders again from the runs held."""
        self.order = sorted((-held.created_at, run_id) for run_id, held in self.runs.items())
        self._by_status = {}
        for key in self.order:
            self._by_status.setdefault(self.runs[key[1]].status, []).append(key)

    def drop(self, run_id: str) -> None:
        """Forget a run that is gone (deleted, archived, or found gone by a page), also
        when a load under way places it later from names or entries read before its purge
        (a run's id is never written again once gone)."""
        if self._dropped is not None:
            self._dropped.add(run_id)
        held = self.runs.pop(run_id, None)
        if held is not None:
            self._counts[held.workflow][held.status] -= 1
            self._unplace(run_id, held)

    def _place(self, run_id: str, held: Held) -> None:
        key = (-held.created_at, run_id)
        bisect.insort(self.order, key)
        bisect.insort(self._by_status.setdefault(held.status, []), key)

    def _unplace(self, run_id: str, held: Held) -> None:
        key = (-held.created_at, run_id)
        for keys in (self.order, self._by_status.get(held.status, [])):
            unplace(keys, key)

    def entries(
        self,
        after: tuple[float, str] | None,
        limit: int,
        status: RunStatus | None,
        workflow: str | None,
    ) -> list[Entry]:
        """The first ``limit`` runs past ``after`` in the runs' order with that status and
        workflow, as the index names them: a walk of the status's own order from the cursor,
        so a status few runs have is as quick to page as the whole list."""
        order = self.order if status is None else self._by_status.get(status, [])
        if workflow is not None and not sum(self._counts.get(workflow, Counter()).values()):
            return []
        runs = self.runs
        at = 0 if after is None else bisect.bisect_right(order, (-after[0], after[1]))
        out: list[Entry] = []
        while at < len(order) and len(out) < limit:
            run_id = order[at][1]
            at += 1
            held = runs[run_id]
            if workflow is None or held.workflow == workflow:
                subject = self._index.subject_of(
                    held.status, held.workflow, held.created_at, run_id
                )
                out.append(Entry(run_id, held.status, held.workflow, held.created_at, subject))
        return out

    def keys_of(
        self,
        run_ids: Iterable[str],
        after: tuple[float, str] | None,
        status: RunStatus | None,
        workflow: str | None,
    ) -> list[tuple[float, str]]:
        """The keys of those of ``run_ids`` the model holds with that status and workflow,
        past ``after``, in the runs' order (a search attribute's candidates, a few)."""
        mark = None if after is None else (-after[0], after[1])
        keys = []
        for run_id in run_ids:
            held = self.runs.get(run_id)
            if held is None or (status is not None and held.status is not status):
                continue
            if workflow is not None and held.workflow != workflow:
                continue
            key = (-held.created_at, run_id)
            if mark is None or key > mark:
                keys.append(key)
        keys.sort()
        return keys

    def counts_of(self, run_ids: Iterable[str], workflow: str | None) -> dict[RunStatus, int]:
        """How many of ``run_ids`` the model holds under each status (of ``workflow``)."""
        tally: Counter[RunStatus] = Counter()
        for run_id in run_ids:
            held = self.runs.get(run_id)
            if held is not None and (workflow is None or held.workflow == workflow):
                tally[held.status] += 1
        return dict(tally)

    def counts(self, workflow: str | None) -> dict[RunStatus, int]:
        tallies = self._counts.values() if workflow is None else [self._counts.get(workflow)]
        total: Counter[RunStatus] = Counter()
        for tally in tallies:
            if tally is not None:
                total.update(tally)
        return {status: n for status, n in total.items() if n > 0}

    # --- reading the stream -------------------------------------------------------------
    def start(self) -> None:
        """Load the model in the background, unless it is loaded or loading (a load that
        failed, the server gone for a moment, is started again)."""
        if self._closed:
            return
        if self._task is None or (self._task.done() and not self.loaded):
            self._task = asyncio.get_running_loop().create_task(self._load())

    async def ready(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the load; whether it is done. False, not a
        cancellation, when the load is stopped under the wait (the world closes): the read
        goes on without the model and fails as any read of a closed world does."""
        self.start()
        task = self._task
        if task is None:  # closed
            return False
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            return False
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and (current is None or not current.cancelling()):
                return False
            raise
        return self.loaded

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Hold back the load's next windows while a read that does not wait for it is
        answered (a page from the index's newest entries, ``runs_tail``): the load's windows
        share the process's event loop with the read, and a window of 1,000 entries decoded
        while the read's own replies wait made a console's first page at 20,000 runs take
        seconds instead of a fraction of one. Windows already asked for still land. The load
        goes on as soon as no read holds it, or once reads held it for longer than they may
        (:data:`HOLD_FREE`, :data:`HOLD_SHARE`: reads that overlap without end would stop it
        for good); a read never waits for the load."""
        self._pausing += 1
        self._quiet += 1
        self._clear.clear()
        try:
            yield
        finally:
            self._pausing -= 1
            if not self._pausing:
                # a console's call reads its page, then its counts, each held: the load goes
                # on once no read held it for QUIET, so that its next request (the index's
                # names, 9.2 MB to decode at 100,000 runs) does not land between the two
                quiet = self._quiet
                asyncio.get_running_loop().call_later(QUIET, self._go_on, quiet)

    def _go_on(self, quiet: int) -> None:
        """Let the load go on, unless a read held it again since (``paused``)."""
        if not self._pausing and quiet == self._quiet:
            self._clear.set()

    async def _reads_first(self) -> None:
        """Wait while a read holds the load back (``paused``), for as long as reads may hold
        it: :data:`HOLD_FREE` seconds and :data:`HOLD_SHARE` of the load's time past them, the
        time counted once however many windows wait together."""
        if self._clear.is_set():
            return
        if not self._holding:
            self._holding_since = time.monotonic()
        self._holding += 1
        try:
            while not self._clear.is_set():
                now = time.monotonic()
                held = self._held + now - self._holding_since
                spare = HOLD_FREE + HOLD_SHARE * (now - self._began) - held
                if spare <= 0:
                    return
                # the time held grows as fast as the time passes, the allowance at
                # HOLD_SHARE of it: the spare time is gone after spare / (1 - HOLD_SHARE)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(spare / (1 - HOLD_SHARE)):
                        await self._clear.wait()
        finally:
            self._holding -= 1
            if not self._holding:
                self._held += time.monotonic() - self._holding_since

    async def _load(self) -> None:
        began = time.perf_counter()
        try:
            async with self._reading:
                await self._fill()
        except Exception as err:  # the reader goes on with the index's names (slow path)
            log.warning("runs index not loaded in memory: %s", err)
            # nothing of a failed load is kept: it may have taken the names and not what
            # was written past them, and the next load starts from an empty model anyway
            self.runs, self.order, self._by_status, self._counts = {}, [], {}, {}
            self.failed = True
            return
        self.load_seconds = time.perf_counter() - began
        self.loaded, self.failed = True, False

    async def _fill(self) -> None:
        """Read the whole index into an empty model (the caller holds ``_reading``): its
        names, then the bodies of the few runs the names cannot place alone, then what the
        stream holds past the last sequence it had before the names were listed. When the
        names take several pages and the stream changed while they were read (a page may
        then miss a name), every message is read instead (``_windows``)."""
        self._dropped = set()
        try:
            await self._fill_from_index()
        finally:
            dropped, self._dropped = self._dropped, None
        # the runs this process deleted or archived meanwhile: the names (one answer, placed
        # a chunk at a time after it) or a window may still have held them
        for run_id in dropped:
            self.drop(run_id)

    async def _fill_from_index(self) -> None:
        self.runs, self.order, self._by_status, self._counts = {}, [], {}, {}
        self.seq = 0
        self._began, self._held = time.monotonic(), 0.0
        info = await self._index.state()
        self._made = info.get("created")
        first, last = int(info.get("first_seq") or 0), int(info.get("last_seq") or 0)
        if last >= first > 0:
            # a read under way goes first (``paused``): the names' answer (9.2 MB at 100,000
            # runs) is decoded on the event loop the read's replies wait on
            await self._reads_first()
            listed, pages = await self._index.listed(self._index.stream, self._filter)
            changed = False
            if pages > 1:
                now = await self._index.state()
                changed = any(now.get(k) != info.get(k) for k in ("last_seq", "num_msgs"))
            if changed:
                self.runs, self._counts = {}, {}
                await self._windows(first, last)
                self.seq = max(self.seq, last)
            else:
                await self._names(listed)
                # the entries read for the names (``_last``) may be later than ``last``: the
                # stream is read on from ``last`` all the same, or what lies in between would
                # be skipped (an entry read twice is taken once)
                self.seq = last
            self.replace()
        await self._forward()

    async def _names(self, subjects: list[str]) -> None:
        """Hold the run each of ``subjects`` (the index's names) names, with its log position
        not read (:data:`UNREAD`): a run named once is placed by its name alone. The runs
        named twice (a purge on its way or lost) and the hashed names (``entry_of``) have
        their last entries read and taken as a window's are. Parsed :data:`WINDOW` names at
        a time, each after the reads that hold the load back (``paused``)."""
        named: dict[str, str] = {}
        twice: set[str] = set()
        unread: list[str] = []
        for at in range(0, len(subjects), WINDOW):
            await asyncio.sleep(0)  # a read's replies are handled between two chunks
            await self._reads_first()
            for subject in subjects[at : at + WINDOW]:
                found = runs_index.named(subject)
                if found is None:
                    if "=h" in subject:
                        unread.append(subject)
                    continue
                run_id, status, workflow, created_at = found
                if run_id in named:
                    twice.add(run_id)
                    unread.append(subject)
                    continue
                named[run_id] = subject
                held = Held(status, workflow, created_at, UNREAD, 0)
                self._take(run_id, held, None, place=False)
        for run_id in twice:
            held = self.runs.pop(run_id)
            self._counts[held.workflow][held.status] -= 1
        unread += [named[run_id] for run_id in twice]
        for msg in await self._last(unread):
            self.absorb(msg, place=False)

    async def _last(self, subjects: list[str]) -> list[StoredMsg]:
        if not subjects:
            return []
        return await read_last(
            self._nc, self._index, subjects, url=self._url, timeout=self._timeout
        )

    async def _windows(self, first: int, last: int) -> None:
        """Read every message from ``first`` to ``last``, in windows read concurrently. A
        window that fails cancels the others (a task group), so none of a failed load's
        reads lands in the model after it."""
        gate = asyncio.Semaphore(WINDOWS_AT_ONCE)

        async def window(start: int) -> None:
            async with gate:
                await self._reads_first()  # a read under way goes first (``paused``)
                msgs = await self._read(start, WINDOW)
            # taken as each window lands (the newest entry of a run wins in any order), so
            # the load never holds the loop for all of them at once
            for msg in msgs:
                if msg.seq < start + WINDOW:
                    self.absorb(msg, place=False)

        try:
            async with asyncio.TaskGroup() as group:
                for start in range(first, last + 1, WINDOW):
                    group.create_task(window(start))
        except ExceptionGroup as failed:  # the first window's error, as a read's
            raise failed.exceptions[0] from None

    async def _settle(self, msgs: list[StoredMsg]) -> None:
        """Before ``msgs`` are taken: a run held from the index's names (:data:`UNREAD`)
        that one of them names under another subject has its held entry's body read, so
        that the entry a repair wrote late from an older read does not replace it, as it
        would not had the model read every message. A held entry gone (purged, as a status
        change does) keeps :data:`UNREAD`, and the newer entry wins."""
        contested: dict[str, str] = {}
        for msg in msgs:
            if not msg.subject.startswith(self._within):
                continue  # another subject of the stream (``newer``): its body is never read
            parsed = parse(msg)
            if parsed is None:
                continue
            run_id = parsed[0]
            held = self.runs.get(run_id)
            if held is None or held.log_seq != UNREAD:
                continue
            subject = self._index.subject_of(held.status, held.workflow, held.created_at, run_id)
            if subject != msg.subject:
                contested[subject] = run_id
        for found in await self._last(list(contested)):
            held = self.runs.get(contested.get(found.subject, ""))
            if held is not None and held.log_seq == UNREAD:
                held.log_seq, held.stream_seq = _seq_of(found.data), found.seq

    async def _read(self, start: int, batch: int) -> list[StoredMsg]:
        return await read_window(
            self._nc, self._index, start, batch, url=self._url, timeout=self._timeout
        )

    async def _forward(self) -> None:
        while True:
            msgs = await self._read(self.seq + 1, WINDOW)
            await self._settle(msgs)
            self.absorb_all(msgs)
            if len(msgs) < WINDOW:
                break
        await self._believe()

    async def _believe(self) -> None:
        """Check the claim of each doubted run's held entry (``Held.doubted``) against the
        run's log, read now: every entry held was written before this read, so one claiming
        a position past the log's last event was forged. The run is then held as its log has
        it, and the index repaired (``RunsIndex.put`` purges the forged entry); a failed
        repair is logged, and the next page that shows the run repairs it. At most
        :data:`DOUBTS_AT_ONCE` runs a call. A run whose log is corrupt is not checked again:
        only its log tells it corrupt, and the same bytes fail the same way at every read."""
        read = self._index.log_info
        if read is None:
            self._doubted.clear()
            return
        doubted = [self._doubted.pop() for _ in range(min(DOUBTS_AT_ONCE, len(self._doubted)))]
        for run_id in doubted:
            held = self.runs.get(run_id)
            try:
                info = None if held is None else await read(run_id)
            except CorruptLogError:  # fenced for good: its log, not the index, shows it corrupt
                continue  # (checked again at every catch-up, it cost a whole-log read each)
            except WaylineError as err:  # a read, not the model, fails: the next one checks
                log.warning("run %s: runs index entry not checked: %s", run_id, err)
                self._doubted.add(run_id)
                continue
            if held is None or info is None or held.log_seq <= info.last_seq:
                continue
            if info.status is RunStatus.CORRUPT:
                continue
            log.warning("run %s: a runs index entry claims log position %d", run_id, held.log_seq)
            real = Held(info.status, info.workflow, info.created_at, info.last_seq, 0)
            self._take(run_id, real, held, place=True)
            try:
                await self._index.put(info)
            except WaylineError as err:
                log.warning("runs index not repaired (run %s): %s", run_id, err)

    async def catch_up(self) -> None:
        """Read what the index's stream holds past what the model read (any writer's)."""
        async with self._reading:
            await self._forward()

    # --- what reading forward does not see ----------------------------------------------
    def upkeep(self, reconcile: Callable[[], Awaitable[object]]) -> None:
        """Start the index's reconciliation with the log (``runs_pages.reconcile``, which
        says itself whether it is due) and a sweep if one is due, in the background, unless
        they are under way: a read does not wait for them."""
        if not self._closed and (self._upkeep is None or self._upkeep.done()):
            self._upkeep = asyncio.get_running_loop().create_task(self._keep(reconcile))

    async def _keep(self, reconcile: Callable[[], Awaitable[object]]) -> None:
        try:
            await reconcile()
            if time.monotonic() - self._swept_at >= SWEEP_EVERY:
                await self.sweep(force=False)
        except Exception as err:  # the next read tries again
            log.warning("runs index upkeep failed: %s", err)

    async def sweep(self, *, force: bool = True) -> int:
        """Drop the runs whose entries were purged (by any process) since the model read
        them; unless ``force``, only when the index names another number of runs than the
        model holds runs. Returns how many it dropped.

        An index's stream made again since the model read it (deleted, then provisioned and
        reconciled from the log again) numbers its entries from 1 again, below the last
        sequence the model read, which reading forward would never reach: the model is then
        read again whole (reads wait for it) and the sweep is done."""
        for _ in range(3):  # the counts compare only once the model has read every entry
            await self.catch_up()
            info = await self._index.state()
            last = int(info.get("last_seq") or 0)
            if info.get("created") != self._made or last < self.seq:
                await self._reload()
                return 0
            if last <= self.seq:
                break
        else:
            if not force:
                return 0  # entries land faster than this reads them: the next upkeep tries
        if not force and int(info.get("num_subjects") or 0) == len(self.runs):
            return 0
        self._swept_at = time.monotonic()
        before = self.seq
        listed = set(await self._index.subjects(self._index.stream, self._filter))
        gone = [
            run_id
            for run_id, held in self.runs.items()
            if held.stream_seq <= before
            and self._index.subject_of(held.status, held.workflow, held.created_at, run_id)
            not in listed
        ]
        for run_id in gone:
            self.drop(run_id)
        return len(gone)

    async def _reload(self) -> None:
        """Read the index's stream again whole, made again since the model read it."""
        log.warning("the runs index's stream was made again: reading it again whole")
        try:
            async with self._reading:
                await self._fill()
        except BaseException:
            self.loaded, self.failed = False, True  # the next read starts a load (``start``)
            raise
        self._swept_at = time.monotonic()

    async def close(self) -> None:
        """Stop the load and the upkeep; no task is started after (a read in flight)."""
        self._closed = True
        for task in (self._task, self._upkeep):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._task = self._upkeep = None
