"""Status driven from the world: the operator follows the world's change feed
(``World.watch_runs``) and writes the status of only the resources whose runs moved, through
the :class:`~.pump.Pump` (coalesced per run, at most one write per run per
``STATUS_INTERVAL_SECONDS``, at most ``PATCHES_PER_SECOND`` in all). What the feed misses (a
reconnect, an operator restart) a slow resync covers: every ``RESYNC_SECONDS`` each live run is
read again, and written only if it moved. Every ``SWEEP_SECONDS`` each live run also gets the
dispatch decision table (``decisions``) on that same path.

The resources come from kopf's watch (``seen``, called from an ``on.event`` handler): nothing
here lists or reads them from the API server. A resource's status as this process last wrote
it is kept, so a write is never repeated while its echo is on its way back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wayline.errors import CorruptLogError, WorldError
from wayline.history import is_run_id
from wayline.settings import Settings
from wayline.world import RunWatch, World

from .config import settings
from .decisions import apply_table
from .instance import DEFAULT_INSTANCE
from .labels import attribute_labels, labels_patch
from .metrics import PATCHES, RECONCILES
from .notices import WARNING, Budget, Notice, notices
from .pump import Pump
from .reconcile import IdInUse, InvalidSpec, Reconciler, parse_spec, run_id_for
from .resource import WorkflowRunSpec
from .status import corrupt_status, run_status
from .ttl import due_in, ended_at

log = logging.getLogger("wayline.operator")

TERMINAL = {"completed", "failed", "cancelled", "continued_as_new", "invalid"}
_KEPT = (
    "lastSeq",
    "phase",
    "message",
    "waitingForSummary",
    "conditions",
    "endedAt",
    "runId",
    "observedGeneration",
    "instance",
)
"""The status fields a sync compares with, and the TTL reads."""

Post = Callable[[Mapping[str, Any], Sequence[Notice]], None]
Patch = Callable[[str, str, Mapping[str, Any]], Any]


@dataclass
class Ref:
    """What kopf's watch last told of one resource."""

    uid: str
    name: str
    namespace: str
    generation: int | None
    spec: dict[str, Any]
    status: dict[str, Any]
    body: dict[str, Any]
    """Enough of the resource to post an Event on it."""
    parsed: WorkflowRunSpec | None = None
    """The spec, validated (None if it is invalid)."""
    labels: dict[str, str] = field(default_factory=dict)
    """The resource's labels as the watch last showed them."""


@dataclass
class Cadence:
    interval: float = 1.0
    rate: float = 100.0
    resync: float = 300.0
    sweep: float = 60.0
    settle: float = 2.0
    """How long a young run's first status waits for the run to end (``Mirror._settling``)."""
    registry: float = 2.0
    """How often the world's worker registry is read (a change touches the runs it concerns)."""
    concurrency: int = 32


@dataclass
class Mirror:
    reconciler: Reconciler
    budget: Budget
    post: Post
    patch: Patch
    remove: Callable[[Mapping[str, Any]], Any]
    cadence: Cadence = field(default_factory=Cadence)
    paused: Callable[[], bool] = lambda: False
    """True while kopf peering pauses this replica: another one writes the statuses."""
    instance: str = DEFAULT_INSTANCE
    """This operator's instance id, recorded in every status it writes (``instance``)."""
    world_name: str = ""
    """The world's URL without credentials, recorded beside the instance."""
    relabel: Patch | None = None
    """Merges a patch into the resource itself (its metadata): the run's search attributes as
    labels (``labels``). None: not mirrored."""
    labelled: dict[str, dict[str, str]] = field(default_factory=dict)
    """By run: the attribute labels this process last wrote (not written again meanwhile)."""
    at_home: set[str] = field(default_factory=set)
    """Runs whose status another instance (or an earlier version) wrote, found in this
    operator's world all the same: not looked for again (``_repair``)."""
    refs: dict[str, Ref] = field(default_factory=dict)
    """By run id: what the watch showed of the resource whose run it is."""
    runs: dict[str, str] = field(default_factory=dict)
    """By resource uid: the run id its ``refs`` entry is under (``run_of``)."""
    written: dict[str, dict[str, Any]] = field(default_factory=dict)
    table_due: dict[str, float] = field(default_factory=dict)
    live_rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    posted_wakes: dict[str, set[str]] = field(default_factory=dict)
    """By run: the keys of the wakes whose Event was posted (one Event a wake, not one a
    sweep); dropped when the run ends or its resource goes, so it holds live runs only."""
    announced: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What a sync posted Events for when its status write then failed (``_announced``)."""
    removing: set[str] = field(default_factory=set)
    served: list[dict[str, Any]] | None = None
    """The world's worker registry as last read (None: not read yet)."""
    recheck: set[str] = field(default_factory=set)
    """Runs to read in full at their next sync although their log did not move."""
    confirmed: set[str] = field(default_factory=set)
    suspects: dict[str, float] = field(default_factory=dict)
    """By run: since when (monotonic) the watch has shown a status this process did not write
    (``_suspected``)."""
    """Ended statuses this process did not write, read against the world once (``_forged``)."""
    _live: frozenset[str] = frozenset()
    """The registry's live entries at its last read (a lapse shows against these)."""
    pump: Pump = field(init=False)
    _watch: RunWatch | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _closing: bool = False
    _registry_at: float = float("-inf")
    """When (monotonic) the registry was last read."""
    _registry_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Ends the loops as well as their cancel, which a call that completes as it lands can
    lose (``asyncio.wait_for`` before Python 3.12, in the NATS client and the pump)."""

    def __post_init__(self) -> None:
        c = self.cadence
        self.pump = Pump(
            self.sync,
            interval=c.interval,
            rate=c.rate,
            concurrency=c.concurrency,
            paused=self.paused,
        )

    @property
    def world(self) -> World:
        return self.reconciler.world

    # lifecycle ------------------------------------------------------------------------------
    async def follow(self, feed: bool = True) -> None:
        """Listen to the world's change feed (before anything is read: nothing in between is
        missed). Without it (``feed=False``, or a world with none) the resync alone drives."""
        if feed:
            self._watch = await self.world.watch_runs(self._heard)
        await self._read_registry()
        if self._watch is None:
            log.warning("no change feed: statuses follow the resync (every %gs)", self.resync)

    @property
    def resync(self) -> float:
        return self.cadence.resync

    def start(self) -> None:
        """Start the loops. Called from inside a kopf handler the first time one runs: the
        tasks then inherit its context, which ``kopf.event`` needs to post Events."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self.pump.run(), name="wayline-operator-status"),
            asyncio.create_task(self._every(self.cadence.resync), name="wayline-operator-resync"),
            asyncio.create_task(self._every(self.cadence.sweep), name="wayline-operator-table"),
            asyncio.create_task(self._registry_loop(), name="wayline-operator-registry"),
        ]

    async def close(self) -> None:
        self._closing = True
        self.pump.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._watch is not None:
            await self._watch.close()
            self._watch = None

    def _heard(self, run_id: str) -> None:
        if run_id in self.refs:  # runs of other namespaces, or started by the CLI: not ours
            self.pump.touch(run_id)

    async def _every(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.pump.touch_all(
                [
                    k
                    for k, ref in self.refs.items()
                    if self._status(k, ref).get("phase") not in TERMINAL
                ]
            )

    async def _registry_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.cadence.registry)
            if not self.paused():
                await self._read_registry()

    async def _fresh_registry(self) -> None:
        """Read the registry again if its last read is older than its cadence. Its loop
        starts with the first WorkflowRun the watch shows (``start``) and skips a paused
        replica's turns: on a fresh installation the first run was judged by the read made
        at the operator's start, before any worker was up, and got a WaitingForWorker
        Warning while its worker was Ready."""
        async with self._registry_lock:
            if time.monotonic() - self._registry_at > self.cadence.registry:
                await self._read_registry()

    async def _read_registry(self) -> None:
        """Read which workers serve what; when the live set changed, re-read the live runs
        that wait for a worker (one may serve them now) or, when a worker's entry lapsed, every
        live run (it may have been the last to serve one)."""
        try:
            served = await self.world.list_served()
        except WorldError as err:
            log.warning("worker registry not read: %s", err)
            return
        before, first = self._live, self.served is None
        after = self._live = _live_keys(served, time.time())
        self.served = served
        self._registry_at = time.monotonic()
        if first or before == after:
            return
        lapsed = bool(before - after)
        for run_id, ref in self.refs.items():
            status = self._status(run_id, ref)
            if status.get("phase") in TERMINAL:
                continue
            if lapsed or str(status.get("waitingForSummary", "")).startswith("worker"):
                self.recheck.add(run_id)
                self.pump.touch(run_id, cold=lapsed)

    # what kopf's watch says -----------------------------------------------------------------
    def run_of(self, uid: str, status: Mapping[str, Any] | None = None) -> str:
        """The id of the resource's run. A business-id run's id depends on the runs the world
        held when it started, so it is never computed again: it is ``status.runId`` (written
        with the first status), else what this process's start said (``bind``), else the
        uid's id (``run_id_for``: a resource from before business ids, or not started yet)."""
        written = (status or {}).get("runId")
        if isinstance(written, str) and is_run_id(written):
            return written
        return self.runs.get(uid) or run_id_for(uid)

    def bind(self, uid: str, run_id: str) -> None:
        """The resource ``uid`` has started run ``run_id``: its entry moves there, and the
        run is synced."""
        before = self.runs.get(uid)
        self.runs[uid] = run_id
        if before is not None and before != run_id:
            ref = self.refs.get(before)
            self.forget(before)
            if ref is not None:
                self.refs[run_id] = ref
        self.pump.touch(run_id)

    def forget_resource(self, uid: str) -> None:
        """The resource is gone (or another instance's): forget it and its run."""
        run_id = self.runs.pop(uid, None) or run_id_for(uid)
        self.forget(run_id)

    def seen(self, event_type: str | None, body: Mapping[str, Any]) -> str | None:
        """Take in one watch event; the run id of the resource (None without a uid)."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return None
        run_id = self.run_of(uid, body.get("status"))
        if event_type == "DELETED":
            self.forget_resource(uid)
            return run_id
        before = self.runs.get(uid)
        if before is not None and before != run_id:
            self.bind(uid, run_id)  # its status names its run now
        self.runs[uid] = run_id
        old = self.refs.get(run_id)
        generation = meta.get("generation")
        ref = Ref(
            uid=uid,
            name=str(meta.get("name")),
            namespace=str(meta.get("namespace")),
            generation=generation if isinstance(generation, int) else None,
            spec=dict(body.get("spec") or {}),
            status={k: v for k, v in (body.get("status") or {}).items() if k in _KEPT},
            labels=dict(meta.get("labels") or {}),
            body={
                "apiVersion": body.get("apiVersion"),
                "kind": body.get("kind"),
                "metadata": {
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": uid,
                },
            },
        )
        if old is not None and old.spec == ref.spec:
            ref.parsed = old.parsed
        else:
            with contextlib.suppress(InvalidSpec):
                ref.parsed = parse_spec(ref.spec)
        self.refs[run_id] = ref
        wrote = self.written.get(run_id)
        mine = _seq(wrote or {})
        if mine is not None and (_seq(ref.status) or 0) > mine:
            # another replica wrote it later (this one was paused): the watch is the truth,
            # and the Events up to there are posted
            self.written.pop(run_id, None)
        elif wrote is not None and _differs(ref.status, wrote):
            # Not what this process wrote last: the echo of an earlier write on its way, or
            # someone else's write (``kubectl patch --subresource=status``, the status
            # removed). Looked at again once the echoes are in (``_suspected``).
            self.suspects.setdefault(run_id, time.monotonic())
            self.pump.touch(run_id, delay=self.cadence.settle)
        else:
            self.suspects.pop(run_id, None)
        if old is None or old.generation != ref.generation:
            self.pump.touch(run_id)  # new to this process, or its spec changed
        elif run_id not in self.written and old.status.get("phase") != ref.status.get("phase"):
            self.confirmed.discard(run_id)  # someone else wrote it: read it against the run
            self.pump.touch(run_id)
        return run_id

    async def _follow(self, run_id: str, ref: Ref, following: str) -> bool:
        """The run went on in run ``following`` (``wayline.continue_as_new``: its business
        id's next generation, which the resource's name is): once that run exists, the
        resource follows it, to the chain's end. False while it does not exist yet (its end
        names it before its creation is written): the resource shows ``continued_as_new``
        until a later sync."""
        if await self.world.get_run(following) is None:
            return False
        log.info("run %s continued as new: its resource follows run %s", run_id, following)
        self.bind(ref.uid, following)
        return True

    async def _forged(self, run_id: str, status: Mapping[str, Any]) -> bool:
        """Whether an ended status says what the run does not. One this process wrote is the
        run's; any other (an earlier process's, another replica's, or one written with
        ``kubectl patch --subresource=status``) is read against the world once, so a forged
        end does not stay for good. A run the world no longer has (cleaned up) keeps its
        status; a read that fails is tried again at the next sync. A failed run is read every
        time: ``wayline runs redrive`` makes it live again, in place, and its resource then
        mirrors it afresh (a TTL on the failed status would otherwise delete the resource and
        so cancel the run the redrive revived)."""
        failed = status.get("phase") == "failed"
        if not failed and (run_id in self.written or run_id in self.confirmed):
            return False
        try:
            info = await self.world.get_run(run_id)
        except CorruptLogError:
            return True  # shown as corrupt below
        except WorldError as err:
            log.warning("run %s: ended status not checked against the world: %s", run_id, err)
            return False
        if info is not None and (
            not info.status.terminal or str(info.status) != status.get("phase")
        ):
            log.log(
                logging.INFO if failed and not info.status.terminal else logging.WARNING,
                "run %s: status %r is not the run's (%s): mirrored again",
                run_id,
                status.get("phase"),
                info.status,
            )
            return True
        self.confirmed.add(run_id)
        return False

    def _suspected(self, run_id: str, ref: Ref) -> None:
        """The status the watch shows is still not this process's last write ``settle``
        seconds after it first showed so: someone else wrote it. Its lie (a live run shown
        ``failed``, a status removed) stayed until the run moved, since each sync compared
        with what this process had written. Forget that write: the run is read in full and
        mirrored again."""
        since = self.suspects.get(run_id)
        if since is None:
            return
        wrote = self.written.get(run_id)
        if wrote is None or not _differs(ref.status, wrote):
            self.suspects.pop(run_id)
            return
        if time.monotonic() - since < self.cadence.settle:
            return  # its echo may be on its way; the touch ``seen`` made comes back then
        self.suspects.pop(run_id)
        log.warning(
            "run %s: status %r was not written by this operator: mirrored again",
            run_id,
            ref.status.get("phase"),
        )
        self.written.pop(run_id, None)
        self.confirmed.discard(run_id)
        self.recheck.add(run_id)

    def forget(self, run_id: str) -> None:
        self.refs.pop(run_id, None)
        self.written.pop(run_id, None)
        self.confirmed.discard(run_id)
        self.table_due.pop(run_id, None)
        self.live_rows.pop(run_id, None)
        self.posted_wakes.pop(run_id, None)
        self.announced.pop(run_id, None)
        self.removing.discard(run_id)
        self.recheck.discard(run_id)
        self.suspects.pop(run_id, None)
        self.at_home.discard(run_id)
        self.labelled.pop(run_id, None)
        self.pump.forget(run_id)

    def _status(self, run_id: str, ref: Ref) -> dict[str, Any]:
        """The status as this process last wrote it, else as the watch last showed it."""
        return self.written.get(run_id) or ref.status

    # one resource ---------------------------------------------------------------------------
    async def sync(self, run_id: str) -> bool:
        """Bring one resource's status up to its run; True if a status was written. Counted as
        the ``mirror`` handler in the operator's metrics (reconciles, status patches)."""
        result = "error"
        try:
            wrote = await self._sync(run_id)
            result = "ok"
        finally:
            RECONCILES.labels("mirror", result).inc()
        if wrote:
            PATCHES.labels("mirror").inc()
        return wrote

    async def _sync(self, run_id: str) -> bool:
        ref = self.refs.get(run_id)
        if ref is None:
            return False
        self._suspected(run_id, ref)
        status = self._status(run_id, ref)
        if status.get("phase") == "continued_as_new":
            went = await self.world.get_run(run_id)
            following = went.continued_as if went is not None else None
            if following is not None and await self._follow(run_id, ref, following):
                return False
        if status.get("phase") in TERMINAL:
            if not await self._forged(run_id, status):
                wrote = await self._observe(run_id, ref, status)
                self._ttl(run_id, ref, self._status(run_id, ref))
                return wrote
            status = {}  # not the run's: mirrored afresh below
        elif status.get("runId") and status.get("instance") != self.instance:
            await self._repair(run_id, ref, status)
            status = {}  # another instance's words (or an earlier version's): written afresh
        spec = self._spec(ref)
        # a paused phase is read too: spec.paused set back to false lifts the pause it made
        asks = spec is not None and (spec.cancel or spec.terminate or spec.paused)
        if spec is not None and (asks or _asks_compensation(spec) or _paused(status)):
            if await self.reconciler.owns(ref.uid, run_id):
                with contextlib.suppress(InvalidSpec):
                    await self.reconciler.act(run_id, ref.spec)
            else:
                log.warning(
                    "WorkflowRun %s: run %s is not its own; its spec acts on nothing",
                    ref.uid,
                    run_id,
                )
        now = time.time()
        table = now >= self.table_due.get(run_id, 0.0)
        full = table or run_id in self.recheck
        self.recheck.discard(run_id)
        known = _seq(status)
        try:
            seen = await self.reconciler.observe(run_id, None if full else known)
        except CorruptLogError as err:  # fenced until `wayline runs repair`; mirrored after
            if status.get("phase") == "corrupt":
                return False
            corrupt = corrupt_status(
                err.message,
                now=now,
                generation=ref.generation,
                previous=status.get("conditions") or [],
            )
            fenced = Notice(WARNING, "CorruptLog", err.message, key=f"corrupt:{err.message}")
            self.post(ref.body, self.budget.admit(ref.uid, [fenced]))
            if not await self.patch(ref.namespace, ref.name, corrupt):
                return False
            self.written[run_id] = {k: corrupt[k] for k in _KEPT if k in corrupt}
            return True
        if seen is None:
            return False  # no run yet (its start is on the way), or nothing moved
        info, events = seen
        if info.continued_as is not None and await self._follow(run_id, ref, info.continued_as):
            return False
        await self._label(run_id, ref, info.search_attributes)
        await self._fresh_registry()
        fresh = run_status(
            info,
            events,
            now=now,
            generation=ref.generation,
            previous=status.get("conditions") or [],
            served=self.served,
        )
        fresh["instance"], fresh["world"] = self.instance, self.world_name
        if self._settling(run_id, status, info.status.terminal, fresh, now - info.created_at):
            return False
        out: dict[str, Any] = {}
        batch: list[Notice] = []
        if not (known == fresh["lastSeq"] and _same(status, fresh)):
            out = fresh
            # notices of log entries are named after them (posted again, they create nothing,
            # and one lost when the API server struggled is posted by the retry); the worker
            # notice has no such name, so it follows what was announced
            batch = notices(events, known or 0)
            batch += _worker_notice(self._announced(run_id, status), fresh)
        if info.status.terminal:
            self.posted_wakes.pop(run_id, None)
            if self.live_rows.pop(run_id, None):
                out.setdefault("steps", {})["live"] = []
        elif table:
            self.table_due[run_id] = now + self.cadence.sweep
            rows, said = await apply_table(
                self.world, run_id, events, now=now, settings=_settings()
            )
            posted = self.posted_wakes.setdefault(run_id, set())
            batch += [replace(n, key=key) for key, n in said if key not in posted]
            posted.update(key for key, _ in said)
            shape = [_row_shape(r) for r in rows]
            if out or shape != self.live_rows.get(run_id, []):
                out.setdefault("steps", dict(fresh["steps"]))["live"] = rows
                self.live_rows[run_id] = shape
        if not out:
            return False
        self.post(ref.body, self.budget.admit(ref.uid, batch))
        if "phase" in out:
            self.announced[run_id] = {
                "lastSeq": fresh["lastSeq"],
                "conditions": fresh["conditions"],
            }
        if not await self.patch(ref.namespace, ref.name, out):
            return False  # deleted meanwhile
        self.announced.pop(run_id, None)
        if "phase" in out:
            self.written[run_id] = {k: fresh[k] for k in _KEPT if k in fresh}
            if info.status.terminal:
                self._ttl(run_id, ref, self.written[run_id])
        return True

    async def _repair(self, run_id: str, ref: Ref, status: Mapping[str, Any]) -> None:
        """A live status that another operator instance wrote: that instance started the run
        in its world, although this one owns the resource (``instance``). If this operator's
        world lacks the run, start it here (the start is idempotent by the resource's uid,
        which the run records, so a repeated repair starts nothing twice) and say so in a
        Warning Event. The other
        world's run is left as it is: this operator cannot reach that world."""
        if run_id in self.at_home:
            return
        info = await self.world.get_run(run_id)
        if info is not None:  # written by an earlier version of this operator, say
            self.at_home.add(run_id)
            return
        other = status.get("instance") or "(one that records none)"
        try:
            started = await self.reconciler.start(
                ref.uid, ref.spec, ref.namespace, ref.name, known=run_id
            )
        except (InvalidSpec, IdInUse):
            return  # its start handler says why, on the resource
        if started != run_id:
            # under its name, this world's run may be of another generation than the other
            # world's: the status names it from the next write on
            self.bind(ref.uid, started)
            run_id = started
        where = f" (world {status['world']})" if status.get("world") else ""
        message = (
            f"run {run_id} was started by operator instance {other}{where}, which does not own "
            f"this WorkflowRun: started again in the world of instance {self.instance} "
            f"({self.world_name}) as run {run_id}; the other world's run is left as it is"
        )
        log.warning("%s/%s: %s", ref.namespace, ref.name, message)
        notice = Notice(WARNING, "WrongInstance", message, key=f"repair:{other}")
        self.post(ref.body, self.budget.admit(ref.uid, [notice]))
        self.at_home.add(run_id)
        self.written.pop(run_id, None)
        self.recheck.add(run_id)

    async def _observe(self, run_id: str, ref: Ref, status: Mapping[str, Any]) -> bool:
        """A run that ended has nothing more to mirror, but a spec edited since (a TTL added,
        a cancel set) is still observed: ``observedGeneration`` (the status's and its
        conditions') follows ``metadata.generation``, or kstatus (Flux, ``kubectl``-based
        rollouts) reads the resource as in progress for good. Only when they differ."""
        generation = ref.generation
        if generation is None or status.get("observedGeneration") in (None, generation):
            return False  # None: a status from before observedGeneration, or kopf's alone
        conditions = [
            {**c, "observedGeneration": generation}
            for c in status.get("conditions") or []
            if isinstance(c, Mapping)
        ]
        out = {"observedGeneration": generation, "conditions": conditions}
        if not await self.patch(ref.namespace, ref.name, out):
            return False  # deleted meanwhile
        self.written[run_id] = {**status, **out}
        return True

    async def _label(self, run_id: str, ref: Ref, attributes: Mapping[str, Any]) -> None:
        """The run's search attributes as the resource's labels, where they changed."""
        if self.relabel is None:
            return
        wanted = attribute_labels(attributes)
        patch = labels_patch(ref.labels, wanted)
        if not patch or self.labelled.get(run_id) == wanted:
            return
        try:
            await self.relabel(ref.namespace, ref.name, {"metadata": {"labels": patch}})
        except Exception as err:  # labels mirror the world: the status is written regardless
            log.warning(
                "run %s: labels of %s/%s not written: %s", run_id, ref.namespace, ref.name, err
            )
            return
        self.labelled[run_id] = wanted

    def _announced(self, run_id: str, status: Mapping[str, Any]) -> Mapping[str, Any]:
        """The status whose ``WaitingForWorker`` has been posted: ``status``, or one ahead of
        it whose write failed after its Events went out (the pump retries that sync, and the
        retry does not say it again)."""
        said = self.announced.get(run_id)
        if said is None or (_seq(said) or 0) < (_seq(status) or 0):
            return status
        return said

    def _settling(
        self,
        run_id: str,
        status: Mapping[str, Any],
        ended: bool,
        fresh: Mapping[str, Any],
        age: float,
    ) -> bool:
        """Hold a young run's first status for ``Cadence.settle`` seconds, unless it ended or
        needs someone (a worker, a hook, a person: ``Blocked``). Most runs end within it, and
        their first status is then their last: one write and one Event instead of two each."""
        if ended or age >= self.cadence.settle or status.get("phase") or _blocked(fresh):
            return False
        self.pump.touch(run_id, delay=self.cadence.settle - age)
        return True

    def _spec(self, ref: Ref) -> WorkflowRunSpec | None:
        return ref.parsed

    def _ttl(self, run_id: str, ref: Ref, status: Mapping[str, Any]) -> None:
        """A finished resource with a TTL: delete it when due, or come back then."""
        spec = self._spec(ref)
        if spec is None or run_id in self.removing or ended_at(status) is None:
            return
        left = due_in(spec.ttlSecondsAfterFinished, status, time.time())
        if left is None:
            return
        if left > 0:
            self.pump.touch(run_id, delay=left)
            return
        self.removing.add(run_id)
        task = asyncio.create_task(self._remove(run_id, ref))
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def _remove(self, run_id: str, ref: Ref) -> None:
        try:
            await self.remove({"name": ref.name, "namespace": ref.namespace})
        except Exception as err:
            self.removing.discard(run_id)
            log.warning("deleting an expired WorkflowRun failed: %s", err)
            self.pump.touch(run_id, delay=5.0)


def _settings() -> Settings:
    return settings()


def _paused(status: Mapping[str, Any]) -> bool:
    return status.get("phase") == "paused"


def _asks_compensation(spec: WorkflowRunSpec) -> bool:
    return bool(spec.compensation.abandon or spec.compensation.resumes)


def _row_shape(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """A live step's row without the lease's countdown (which alone is no reason to write)."""
    return tuple(sorted((k, repr(v)) for k, v in row.items() if k != "leaseRemainingSeconds"))


def _live_keys(served: Sequence[Mapping[str, Any]], now: float) -> frozenset[str]:
    return frozenset(str(e.get("key")) for e in served if float(e.get("liveUntil", 0)) >= now)


def _seq(status: Mapping[str, Any]) -> int | None:
    seq = status.get("lastSeq")
    return seq if isinstance(seq, int) else None


def _blocked(fresh: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Blocked" and c.get("status") == "True"
        for c in fresh.get("conditions") or []
    )


def _differs(shown: Mapping[str, Any], wrote: Mapping[str, Any]) -> bool:
    """The status the watch shows says otherwise than this process's last write."""
    return any(shown.get(k) != v for k, v in wrote.items())


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    keys = ("phase", "message", "waitingForSummary", "conditions")
    return all(old.get(k) == new.get(k) for k in keys)


def _worker_notice(old: Mapping[str, Any], fresh: Mapping[str, Any]) -> list[Notice]:
    """``WaitingForWorker`` once, when the Blocked condition first gives that reason."""
    previous = old.get("conditions") or []
    was = {c.get("type"): c for c in previous if isinstance(c, Mapping)}.get("Blocked") or {}
    now_blocked = next(c for c in fresh["conditions"] if c["type"] == "Blocked")
    if now_blocked["reason"] == "WaitingForWorker" and was.get("reason") != "WaitingForWorker":
        return [Notice(WARNING, "WaitingForWorker", now_blocked["message"])]
    return []
