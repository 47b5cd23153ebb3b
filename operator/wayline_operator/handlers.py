"""The kopf handlers. Settings come from the environment:

- ``WAYLINE_WORLD``: the world URL (``nats://…`` in a cluster), as for every wayline command;
- ``WAYLINE_OPERATOR_POLL_SECONDS`` (2): how often a live run's status is mirrored;
- ``WAYLINE_OPERATOR_SWEEP_SECONDS`` (60): how often runs with no wake coming are re-armed;
- ``WAYLINE_OPERATOR_HOOK_RETRY_SECONDS`` (5): how often a WorkflowHook whose run has not
  reached its hook yet tries again;
- ``WAYLINE_OPERATOR_WORKER_GRACE_SECONDS`` (10): how long a run may wait for its first worker
  before the resource says ``WaitingForWorker``.

Kubernetes Events (``kubectl describe``) say what happened to the run (``notices``), at most a
burst of 20 per resource and then one every 3 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from wayline import Worker, open_world
from wayline.errors import WorldError
from wayline.settings import Settings

from .decisions import apply_table
from .metrics import EVENTS, observed
from .notices import NORMAL, WARNING, Budget, Notice, notices
from .reconcile import HookNotReady, InvalidSpec, Reconciler, parse_spec, run_id_for
from .resource import GROUP, HOOK_PLURAL, PLURAL, VERSION
from .status import invalid_status, run_status
from .ttl import expired, remove

log = logging.getLogger("wayline.operator")

POLL_SECONDS = float(os.environ.get("WAYLINE_OPERATOR_POLL_SECONDS", "2"))
SWEEP_SECONDS = float(os.environ.get("WAYLINE_OPERATOR_SWEEP_SECONDS", "60"))
HOOK_RETRY_SECONDS = float(os.environ.get("WAYLINE_OPERATOR_HOOK_RETRY_SECONDS", "5"))
WORKER_GRACE_SECONDS = float(os.environ.get("WAYLINE_OPERATOR_WORKER_GRACE_SECONDS", "10"))
WORLD_URL = "WAYLINE_WORLD"
_TERMINAL = {"completed", "failed", "cancelled", "invalid"}


def configure(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.watching.server_timeout = 600
    settings.execution.default_backoff = 5
    logging.getLogger("kopf.objects").addFilter(_quiet)


_ROUTINE = ("Timer 'mirror' succeeded.", "Timer 'redeliver' succeeded.")


def _quiet(record: logging.LogRecord) -> bool:
    """kopf logs every timer tick at INFO; a mirror that ran says nothing worth a line."""
    return record.getMessage() not in _ROUTINE


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    world = open_world(os.environ.get(WORLD_URL) or "sqlite:///.wayline/wayline.db")
    await world.start()
    memo["reconciler"] = Reconciler(world)
    memo["budget"] = Budget()
    memo["sweeper"] = asyncio.create_task(_sweep(world), name="wayline-operator-sweep")


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    sweeper = memo.get("sweeper")
    if sweeper is not None:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
    reconciler = memo.get("reconciler")
    if reconciler is not None:
        await reconciler.world.close()


async def _sweep(world: Any) -> None:
    """Recovery is automatic: every ``SWEEP_SECONDS`` re-arm the runs that have no wake
    coming (the same pass a worker makes when it starts)."""
    sweeper = Worker(world, [], recover=False)
    while True:
        try:
            counts = await sweeper.recover_runs()
            if counts["rearmed"]:
                log.info("sweep re-armed %d of %d live runs", counts["rearmed"], counts["total"])
        except WorldError as err:
            log.warning("sweep skipped: %s", err)
        await asyncio.sleep(SWEEP_SECONDS)


def _detach(work: Any, memo: kopf.Memo) -> None:
    """Run ``work`` beside the handlers (kept referenced until it ends; errors logged)."""
    tasks: set[asyncio.Task[None]] = memo.setdefault("detached", set())
    task: asyncio.Task[None] = asyncio.create_task(work)
    tasks.add(task)

    def done(t: asyncio.Task[None]) -> None:
        tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.warning("deleting an expired WorkflowRun failed: %s", t.exception())

    task.add_done_callback(done)


def _reconciler(memo: kopf.Memo) -> Reconciler:
    return memo["reconciler"]  # type: ignore[no-any-return]


def _post(body: kopf.Body, memo: kopf.Memo, batch: Sequence[Notice]) -> None:
    """Post Events on the resource, within its budget."""
    budget: Budget = memo["budget"]
    for notice in budget.admit(str(body.get("metadata", {}).get("uid")), batch):
        kopf.event(body, type=notice.type, reason=notice.reason, message=notice.message[:1024])
        EVENTS.labels(notice.reason).inc()


def _generation(meta: Mapping[str, Any]) -> int | None:
    value = meta.get("generation")
    return value if isinstance(value, int) else None


async def _mirror(
    body: kopf.Body,
    meta: Mapping[str, Any],
    status: Mapping[str, Any],
    patch: kopf.Patch,
    memo: kopf.Memo,
    run_id: str,
) -> None:
    """Mirror the run's log into the status, and post Events for what happened since the
    status was last written."""
    seq = status.get("lastSeq")
    known = seq if isinstance(seq, int) else None
    seen = await _reconciler(memo).observe(run_id, known)
    if seen is None:
        return
    info, events = seen
    previous = status.get("conditions") or []
    fresh = run_status(
        info,
        events,
        now=time.time(),
        generation=_generation(meta),
        previous=previous,
        worker_grace=WORKER_GRACE_SECONDS,
    )
    if known == fresh["lastSeq"] and _same(status, fresh):
        return  # nothing moved (a pending run checked against the clock)
    batch = notices(events, known or 0)
    was = {c.get("type"): c for c in previous if isinstance(c, Mapping)}.get("Blocked") or {}
    now_blocked = next(c for c in fresh["conditions"] if c["type"] == "Blocked")
    if now_blocked["reason"] == "WaitingForWorker" and was.get("reason") != "WaitingForWorker":
        batch.append(Notice(WARNING, "WaitingForWorker", now_blocked["message"]))
    _post(body, memo, batch)
    patch.status.update(fresh)


def _same(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    keys = ("phase", "message", "waitingForSummary", "conditions")
    return all(old.get(k) == new.get(k) for k in keys)


@kopf.on.resume(GROUP, VERSION, PLURAL, id="start")
@kopf.on.create(GROUP, VERSION, PLURAL, id="start")
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
    try:
        run_id = await _reconciler(memo).start(uid, spec)
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
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
    await _mirror(body, meta, status, patch, memo, run_id)


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", id="act")
@observed("act")
async def act(spec: kopf.Spec, uid: str, memo: kopf.Memo, **_: Any) -> None:
    try:
        await _reconciler(memo).act(uid, spec)
    except InvalidSpec as err:
        raise kopf.PermanentError(str(err)) from None
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None


@kopf.timer(GROUP, VERSION, PLURAL, id="mirror", interval=POLL_SECONDS, initial_delay=0.5)
@observed("mirror")
async def mirror(
    body: kopf.Body,
    meta: kopf.Meta,
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """Mirror the run's log into the status, and carry the spec's decisions again (an
    ``act`` lost to a crash is repeated here; each decision is done once). A resource whose
    run ended is deleted ``spec.ttlSecondsAfterFinished`` after its end."""
    if status.get("phase") in _TERMINAL:
        with contextlib.suppress(InvalidSpec):
            if expired(parse_spec(spec).ttlSecondsAfterFinished, status, time.time()):
                _detach(remove(dict(meta)), memo)  # not from inside this timer: kopf stops it
        return
    if not status.get("runId"):
        return  # not started yet: the start handler runs first
    reconciler = _reconciler(memo)
    try:
        with contextlib.suppress(InvalidSpec):
            await reconciler.act(uid, spec)
        await _mirror(body, meta, status, patch, memo, run_id_for(uid))
        await _table(body, uid, patch, memo)
    except WorldError as err:
        log.warning("mirroring %s skipped: %s", uid, err)


async def _table(body: kopf.Body, uid: str, patch: kopf.Patch, memo: kopf.Memo) -> None:
    """Every ``SWEEP_SECONDS`` per live run: apply the decision table to its live steps
    (``decisions``), list them in ``status.steps.live`` and say what was ensured."""
    due: dict[str, float] = memo.setdefault("table_due", {})
    now = time.time()
    if now < due.get(uid, 0.0):
        return
    due[uid] = now + SWEEP_SECONDS
    world = _reconciler(memo).world
    run_id = run_id_for(uid)
    info = await world.get_run(run_id)
    if info is None or info.status.terminal:
        return
    events = await world.list_events(run_id)
    settings = memo.get("settings") or Settings.from_env()
    memo["settings"] = settings
    rows, said = await apply_table(world, run_id, events, now=now, settings=settings)
    posted: set[str] = memo.setdefault("posted_wakes", set())
    _post(body, memo, [n for key, n in said if key not in posted])
    posted.update(key for key, _ in said)
    patch.status.update({"steps": {"live": rows}})


@kopf.on.delete(GROUP, VERSION, PLURAL, id="stop")
@observed("stop")
async def stop(uid: str, memo: kopf.Memo, **_: Any) -> None:
    try:
        await _reconciler(memo).stop(uid)
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
    memo["budget"].forget(uid)


async def _deliver(
    body: kopf.Body,
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
) -> None:
    """Deliver the hook's payload once; until its run reaches the hook it waits (``phase:
    waiting``, tried again by the ``redeliver`` timer)."""
    if status.get("phase") in ("delivered", "failed"):
        return
    try:
        fresh = await _reconciler(memo).deliver(uid, spec)
    except HookNotReady as err:
        if status.get("phase") != "waiting":
            patch.status.update({"phase": "waiting", "message": str(err)})
            _post(body, memo, [Notice(NORMAL, "Waiting", f"{err}; trying again")])
        return
    except InvalidSpec as err:
        patch.status.update({"phase": "failed", "message": str(err)})
        _post(body, memo, [Notice(WARNING, "Failed", str(err))])
        return
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
    patch.status.update(fresh)
    _post(body, memo, [Notice(NORMAL, "Delivered", f"payload delivered to run {fresh['runId']}")])


@kopf.on.resume(GROUP, VERSION, HOOK_PLURAL, id="deliver")
@kopf.on.create(GROUP, VERSION, HOOK_PLURAL, id="deliver")
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
    await _deliver(body, spec, uid, status, patch, memo)


def _waiting(status: kopf.Status, **_: Any) -> bool:
    return status.get("phase") == "waiting"


@kopf.timer(GROUP, VERSION, HOOK_PLURAL, id="redeliver", interval=HOOK_RETRY_SECONDS, when=_waiting)
@observed("redeliver")
async def redeliver(
    body: kopf.Body,
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """A waiting ``WorkflowHook`` tries again (quietly: waiting is not a failure)."""
    try:
        await _deliver(body, spec, uid, status, patch, memo)
    except kopf.TemporaryError as err:
        log.warning("hook %s: %s", uid, err)
