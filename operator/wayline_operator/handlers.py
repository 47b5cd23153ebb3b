"""The kopf handlers. Their settings are ``wayline_operator.config.settings()``, read from the
environment by ``wayline.settings`` (the only reader): the world URL, the status cadence
(``WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS``, ``..._PATCHES_PER_SECOND``,
``..._RESYNC_SECONDS``, ``..._CHANGE_FEED``), the sweep and hook-retry intervals.

Statuses are written from the world's change feed, not per resource on a timer (``mirror``).
Kubernetes Events (``kubectl describe``) say what happened to the run (``notices``), at most a
burst of 20 per resource and then one every 3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import kopf

from wayline import Worker, open_world
from wayline.errors import WorldError

from .announce import post
from .config import settings
from .inputs import InputNotFound
from .inputs import resolve as resolve_input
from .instance import current, world_name
from .kube import (
    create_event,
    event_body,
    event_name,
    exists,
    patch_run,
    patch_status,
    release_legacy,
)
from .metrics import EVENTS, observed
from .mirror import Cadence, Mirror
from .notices import NORMAL, WARNING, Budget, Notice
from .peering import GATE
from .periodic import Periodic
from .persistence import MemoryProgress, NoDiffBase
from .reconcile import (
    HookBuffered,
    HookNotReady,
    IdInUse,
    InvalidSpec,
    Reconciler,
    WrongNamespace,
)
from .resource import GROUP, HOOK_PLURAL, PLURAL, VERSION
from .status import hook_status, id_in_use_status, invalid_status, seconds_of
from .ttl import remove

log = logging.getLogger("wayline.operator")

SETTINGS = settings()
SWEEP_SECONDS = SETTINGS.operator_sweep_seconds
HOOK_RETRY_SECONDS = SETTINGS.operator_hook_retry_seconds
_TERMINAL = {"completed", "failed", "cancelled", "continued_as_new", "invalid"}
WORLD_RETRY_SECONDS = 2.0
"""How soon a start whose world did not answer is tried again."""
INPUT_RETRY_SECONDS = 5.0
"""How soon a start whose ``spec.inputFrom`` was not there is tried again."""
ID_RETRY_SECONDS = 2.0
"""How soon a start whose name a live run holds is tried again: that run is usually the one
of a resource of the same name just deleted, which ends as soon as a worker cancels it."""


def cadence() -> Cadence:
    return Cadence(
        interval=SETTINGS.operator_status_interval_seconds,
        rate=SETTINGS.operator_patches_per_second,
        resync=SETTINGS.operator_resync_seconds,
        sweep=SWEEP_SECONDS,
    )


def configure(settings: kopf.OperatorSettings) -> None:
    # kopf puts its finalizer on no resource: no handler needs one (no ``on.delete``, no kopf
    # timer: ``periodic``), so a delete never waits for an operator. The name stays this
    # instance's, the one earlier versions put on a waiting WorkflowHook and a
    # WorkflowSchedule: kopf takes its finalizer off every resource it sees that no handler
    # needs it on, so those lose it at this version's first look. Nothing else of kopf's is
    # kept on a resource (``persistence``); user payloads never went into annotations either
    # way.
    settings.persistence.finalizer = current().finalizer
    settings.persistence.progress_storage = MemoryProgress(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = SOURCE  # kopf's Events and ours say one source
    settings.posting.reporting_instance = SETTINGS.operator_identity or "dev"
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.watching.server_timeout = 600
    settings.execution.default_backoff = 5
    # After its own patch kopf waits this long for that version's echo before it handles an
    # older one as current. Statuses are written beside kopf's patches (``mirror``): with
    # kopf's 5 s, a loaded API server let a status echo that came first pass for the current
    # state, and a creation was handled twice (idempotent, but writes and a start wasted).
    settings.persistence.consistency_timeout = 30
    logging.getLogger("kopf.objects").addFilter(_quiet)
    logging.getLogger("kopf.activities.startup").addFilter(_retried_is_a_warning)


_ROUTINE = (
    "Handler 'seen' succeeded.",
    "Handler 'hook-seen' succeeded.",
    "Handler 'schedule-seen' succeeded.",
)


def _quiet(record: logging.LogRecord) -> bool:
    """kopf logs every watch event's handler at INFO: routine, not worth a line."""
    return record.getMessage() not in _ROUTINE


def _retried_is_a_warning(record: logging.LogRecord) -> bool:
    """kopf logs a start it will try again at ERROR. The only one ``startup`` raises is a
    world not up yet, which every ``helm install`` meets (NATS starts beside the operator):
    a warning, so that an ERROR line at install means something is wrong."""
    if record.levelno == logging.ERROR and "failed temporarily" in record.getMessage():
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    world = open_world(SETTINGS.world_url)
    try:
        await world.start()
    except WorldError as err:
        # A world not up yet (``helm install`` starts NATS beside the operator): try again
        # soon. Raised as it was, kopf waited its first retry's default of 60 s (the backoff
        # ``configure`` sets is read only for the next one), and printed a traceback.
        with contextlib.suppress(Exception):
            await world.close()
        raise kopf.TemporaryError(f"{err}; trying again", delay=WORLD_RETRY_SECONDS) from None
    reconciler = Reconciler(world)
    memo["reconciler"] = reconciler
    memo["budget"] = budget = Budget()
    mirror = Mirror(
        reconciler,
        budget,
        _post_events,
        patch_status,
        remove,
        cadence(),
        paused=_paused,
        instance=current().instance,
        world_name=world_name(SETTINGS.world_url),
        relabel=patch_run,
    )
    await mirror.follow(SETTINGS.operator_change_feed)
    memo["mirror"] = mirror
    memo["hooks"] = Periodic(
        "redeliver",
        HOOK_RETRY_SECONDS,
        _redeliverer(memo),
        _paused,
        functools.partial(exists, plural=HOOK_PLURAL),
    )
    memo["sweep_stop"] = stop = asyncio.Event()
    memo["sweeper"] = asyncio.create_task(_sweep(world, stop), name="wayline-operator-sweep")


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    sweeper = memo.get("sweeper")
    if sweeper is not None:
        memo["sweep_stop"].set()  # as well as its cancel, which a world call can lose
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
    hooks = memo.get("hooks")
    if hooks is not None:
        await hooks.close()
    mirror = memo.get("mirror")
    if mirror is not None:
        await mirror.close()
    await _drain_posting()
    reconciler = memo.get("reconciler")
    if reconciler is not None:
        await reconciler.world.close()


async def _sweep(world: Any, stop: asyncio.Event) -> None:
    """Recovery is automatic: every ``SWEEP_SECONDS`` re-arm the runs that have no wake
    coming (the same pass a worker makes when it starts). Ends on ``stop`` as well as on its
    cancel: a cancel that lands as a world call completes can be lost (``asyncio.wait_for``
    before Python 3.12, in the NATS client), and cleanup waits for this task."""
    sweeper = Worker(world, [], recover=False)
    while not stop.is_set():
        if GATE.paused:  # another replica sweeps
            await asyncio.sleep(1.0)
            continue
        try:
            counts = await sweeper.recover_runs()
            if counts["rearmed"]:
                log.info("sweep re-armed %d of %d live runs", counts["rearmed"], counts["total"])
        except WorldError as err:
            log.warning("sweep skipped: %s", err)
        if not stop.is_set():
            await asyncio.sleep(SWEEP_SECONDS)


def _paused() -> bool:
    return GATE.paused


def _reconciler(memo: kopf.Memo) -> Reconciler:
    return memo["reconciler"]  # type: ignore[no-any-return]


def _mirror(memo: kopf.Memo) -> Mirror:
    return memo["mirror"]  # type: ignore[no-any-return]


def _post(body: Mapping[str, Any], memo: kopf.Memo, batch: Sequence[Notice]) -> None:
    """Post Events on the resource, within its budget."""
    budget: Budget = memo["budget"]
    _post_events(body, budget.admit(str(body.get("metadata", {}).get("uid")), batch))


def _post_events(body: Mapping[str, Any], batch: Sequence[Notice]) -> None:
    """A notice with a key is created under a name derived from it, in the background: a
    second post of it (a retried sync, another replica, a restart) creates nothing, and an
    HTTP retry after a create that did reach etcd cannot make a second Event. One without a
    key goes through kopf's poster."""
    keyed = [n for n in batch if n.key]
    post(body, [n for n in batch if not n.key])
    for notice in keyed:
        EVENTS.labels(notice.reason).inc()
    if keyed:
        # built now, in the order the log says them (their times too); created in order
        uid = str((body.get("metadata") or {}).get("uid"))
        name = str((body.get("metadata") or {}).get("name"))
        events = [
            event_body(
                body,
                n.type,
                n.reason,
                n.message,
                event_name(name, uid, n.key, n.reason),
                SOURCE,
            )
            for n in keyed
        ]
        task = asyncio.get_running_loop().create_task(_create_events(events))
        _POSTING.add(task)
        task.add_done_callback(_POSTING.discard)


_POSTING: set[asyncio.Task[None]] = set()
SOURCE = "wayline-operator"


async def _create_events(events: Sequence[Mapping[str, Any]]) -> None:
    for event in events:
        try:
            await create_event(event)
        except Exception as err:  # Events are auxiliary: the status is the record
            log.warning(
                "Event %s on %s not posted: %s",
                event["reason"],
                event["involvedObject"]["name"],
                err,
            )


async def _drain_posting(timeout: float = 5.0) -> None:
    """At shutdown: let the Events being created finish (a replica that takes over would not
    post them: its status says they were said), for at most ``timeout`` seconds."""
    if _POSTING:
        await asyncio.wait(list(_POSTING), timeout=timeout)


def _generation(meta: Mapping[str, Any]) -> int | None:
    value = meta.get("generation")
    return value if isinstance(value, int) else None


@kopf.on.event(GROUP, VERSION, PLURAL, id="seen")
async def seen(event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Every watch event of a WorkflowRun (the initial listing included) tells the mirror what
    exists; a new resource or a changed spec is synced at once. A deleted one (or one whose
    deletion waits on someone else's finalizer) has its run cancelled."""
    mirror = _mirror(memo)
    mirror.start()  # from inside a handler: its loops inherit what kopf.event needs
    meta = body.get("metadata") or {}
    if not current().owns(body):  # another instance's (its label says so, or it was relabelled)
        mirror.forget_resource(str(meta.get("uid")))
        return
    run_id = mirror.seen(event.get("type"), body)
    if run_id is not None and (event.get("type") == "DELETED" or meta.get("deletionTimestamp")):
        await stop(str(meta.get("uid")), run_id, memo)
    await release_legacy(event.get("type"), meta, PLURAL)


def _owned(body: kopf.Body, **_: Any) -> bool:
    """This operator's resource (``instance``): every other handler runs for these only."""
    return current().owns(body)


def _unstarted(body: kopf.Body, status: kopf.Status, **_: Any) -> bool:
    """kopf sees every event as a creation (``persistence``): start only what has no run."""
    return _owned(body) and not status.get("runId") and status.get("phase") not in _TERMINAL


@kopf.on.resume(GROUP, VERSION, PLURAL, id="start", when=_unstarted)
@kopf.on.create(GROUP, VERSION, PLURAL, id="start", when=_unstarted)
@observed("start")
async def start(
    body: kopf.Body,
    meta: kopf.Meta,
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    if status.get("phase") in _TERMINAL:
        return
    namespace = meta.get("namespace")
    try:
        resolved = await resolve_input(spec, namespace)
        run_id = await _reconciler(memo).start(uid, resolved, namespace, meta.get("name"))
    except InputNotFound as err:
        _post(body, memo, [Notice(WARNING, "InputNotFound", str(err), key="input-from")])
        raise kopf.TemporaryError(f"{err}; trying again", delay=INPUT_RETRY_SECONDS) from None
    except InvalidSpec as err:
        fresh = invalid_status(
            str(err),
            now=time.time(),
            generation=_generation(meta),
            previous=status.get("conditions") or [],
        )
        patch.status.update(fresh)
        _post(body, memo, [Notice(WARNING, "InvalidSpec", str(err))])
        raise kopf.PermanentError(str(err)) from None
    except IdInUse as err:
        # The name's live run is another resource's (deleted, its run still cancelling) or a
        # client's: this resource waits for it to end, as a kubectl user who deletes and
        # re-applies a WorkflowRun expects its run to start again (docs/operator.md).
        held = id_in_use_status(
            str(err),
            now=time.time(),
            generation=_generation(meta),
            previous=status.get("conditions") or [],
        )
        if status.get("message") != held["message"]:  # once, not at every retry
            patch.status.update(held)
        _post(body, memo, [Notice(WARNING, "IdInUse", str(err), key=f"id-in-use:{err.run_id}")])
        raise kopf.TemporaryError(f"{err}; trying again", delay=ID_RETRY_SECONDS) from None
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
    mirror = _mirror(memo)
    mirror.start()
    mirror.bind(uid, run_id)


STOP_ATTEMPTS = 5
"""How often a deleted resource's cancel is tried while its world does not answer (every
``WORLD_RETRY_SECONDS``): no later watch event of a deleted resource would try it again."""


@observed("stop")
async def stop(uid: str, run_id: str, memo: kopf.Memo) -> None:
    """The resource was deleted: cancel its run. WorkflowRuns carry no finalizer (kopf adds
    none: no handler needs one), so a delete never waits for this operator; it is seen on the
    watch instead. A finalizer made every delete wait for an operator, hung for good once the
    operator was uninstalled, and its removal raced the status writes of a bulk delete (kopf
    removes it with a JSON patch that tests the resourceVersion: one HTTP 422 and another
    round per write in between). What that gives up: a resource deleted while no operator
    watches leaves its run as it is (``docs/operator.md``, Delete)."""
    for attempt in range(1, STOP_ATTEMPTS + 1):
        try:
            reconciler = _reconciler(memo)
            if not await reconciler.owns(uid, run_id):
                log.warning(
                    "WorkflowRun %s deleted: run %s is not its own; not cancelled", uid, run_id
                )
                break
            await reconciler.stop(run_id)
            break
        except WorldError as err:
            if attempt == STOP_ATTEMPTS:
                log.error("WorkflowRun %s deleted, its run not cancelled: %s", uid, err)
                break
            log.warning("WorkflowRun %s deleted, its run's cancel tried again: %s", uid, err)
            await asyncio.sleep(WORLD_RETRY_SECONDS)
    memo["budget"].forget(uid)


async def _deliver(
    body: Mapping[str, Any],
    spec: Mapping[str, Any],
    uid: str,
    status: Mapping[str, Any],
    memo: kopf.Memo,
) -> dict[str, Any] | None:
    """Deliver the hook's payload once; until its run reaches the hook it waits (``phase:
    waiting``, tried again by the ``redeliver`` pass). The status to write, if any."""
    if status.get("phase") in ("delivered", "failed"):
        return None
    fresh: dict[str, Any] = {}

    def update(
        phase: str, message: str, run_id: str | None = None, reason: str | None = None
    ) -> None:
        fresh.update(
            hook_status(
                phase,
                message,
                now=time.time(),
                generation=(body.get("metadata") or {}).get("generation"),
                previous=status.get("conditions") or (),
                run_id=run_id,
                reason=reason,
            )
        )

    namespace = (body.get("metadata") or {}).get("namespace")
    created = seconds_of((body.get("metadata") or {}).get("creationTimestamp"))
    try:
        run_id = await _reconciler(memo).deliver(uid, spec, namespace, created)
    except WrongNamespace as err:
        # for good, as a refused payload: tried again it would be refused again (a run's
        # namespace never changes). The hook stays open for a WorkflowHook of its namespace.
        update("failed", str(err), reason="WrongNamespace")
        _post(body, memo, [Notice(WARNING, "WrongNamespace", str(err))])
        return fresh
    except HookNotReady as err:
        if status.get("phase") != "waiting":
            if isinstance(err, HookBuffered):
                update("waiting", str(err), reason="Buffered")
                _post(body, memo, [Notice(NORMAL, "Buffered", str(err))])
            else:
                update("waiting", str(err))
                _post(body, memo, [Notice(NORMAL, "Waiting", f"{err}; trying again")])
        return fresh or None
    except InvalidSpec as err:
        update("failed", str(err))
        _post(body, memo, [Notice(WARNING, "Failed", str(err))])
        return fresh
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
    delivered = f"payload delivered to run {run_id}"
    update("delivered", delivered, run_id)
    _post(body, memo, [Notice(NORMAL, "Delivered", delivered)])
    return fresh


def _undelivered(body: kopf.Body, status: kopf.Status, **_: Any) -> bool:
    """Not yet tried (a waiting hook is the ``redeliver`` pass's; ``persistence``)."""
    return _owned(body) and status.get("phase") not in ("delivered", "failed", "waiting")


@kopf.on.resume(GROUP, VERSION, HOOK_PLURAL, id="deliver", when=_undelivered)
@kopf.on.create(GROUP, VERSION, HOOK_PLURAL, id="deliver", when=_undelivered)
@observed("deliver")
async def deliver(
    body: kopf.Body,
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """A ``WorkflowHook`` delivers its payload once."""
    fresh = await _deliver(body, spec, uid, status, memo)
    if fresh:
        patch.status.update(fresh)


@kopf.on.event(GROUP, VERSION, HOOK_PLURAL, id="hook-seen")
async def hook_seen(event: Mapping[str, Any], body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Every watch event of a WorkflowHook: a waiting one joins the ``redeliver`` pass, any
    other (delivered, failed, deleted, another instance's) leaves it; the legacy finalizer of
    an owned one is taken off."""
    hooks: Periodic = memo["hooks"]
    hooks.start()  # from inside a handler: its looks inherit what kopf.event needs
    owned = _owned(body)
    waiting = owned and (body.get("status") or {}).get("phase") == "waiting"
    hooks.seen(event.get("type"), copy.deepcopy(dict(body)) if waiting else body, waiting)
    if owned:
        await release_legacy(event.get("type"), body.get("metadata") or {}, HOOK_PLURAL)


def _redeliverer(
    memo: kopf.Memo,
) -> Callable[[Mapping[str, Any], Callable[[], bool]], Awaitable[None]]:
    """The ``redeliver`` pass's look at one waiting hook, with the operator's ``memo``."""
    return functools.partial(redeliver, memo=memo)


@observed("redeliver")
async def redeliver(body: Mapping[str, Any], kept: Callable[[], bool], memo: kopf.Memo) -> None:
    """A waiting ``WorkflowHook`` tries again (quietly: waiting is not a failure). One the
    watch no longer shows (deleted since its look was due) delivers nothing."""
    if not kept():
        return
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    fresh = await _deliver(body, body.get("spec") or {}, str(meta.get("uid")), status, memo)
    if fresh:
        await patch_status(str(meta.get("namespace")), str(meta.get("name")), fresh, HOOK_PLURAL)
