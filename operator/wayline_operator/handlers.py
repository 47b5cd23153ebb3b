"""The kopf handlers. Their settings (world URL, poll, sweep and hook-retry intervals) are
``wayline_operator.config.settings()``, read from the environment by ``wayline.settings``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf

from wayline import Worker, open_world
from wayline.errors import CorruptLogError, WorldError

from .config import settings
from .reconcile import HookNotReady, InvalidSpec, Reconciler, run_id_for
from .resource import GROUP, HOOK_PLURAL, PLURAL, VERSION
from .status import invalid_status

log = logging.getLogger("wayline.operator")

SETTINGS = settings()
POLL_SECONDS = SETTINGS.operator_poll_seconds
SWEEP_SECONDS = SETTINGS.operator_sweep_seconds
HOOK_RETRY_SECONDS = SETTINGS.operator_hook_retry_seconds
_TERMINAL = {"completed", "failed", "cancelled", "invalid"}


def configure(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP,
        key="last-handled-configuration",
        # user payloads never go into annotations (256 KiB for all of them): a large input
        # would make every later patch of the resource fail. Both are immutable in effect (a
        # run's input is fixed at its start, a hook delivers once), so no handler diffs them.
        ignored_fields=["spec.input", "spec.payload"],
    )
    settings.posting.level = logging.WARNING
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.watching.server_timeout = 600
    settings.execution.default_backoff = 5


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    world = open_world(SETTINGS.world_url)
    await world.start()
    memo["reconciler"] = Reconciler(world)
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


def _reconciler(memo: kopf.Memo) -> Reconciler:
    return memo["reconciler"]  # type: ignore[no-any-return]


@kopf.on.resume(GROUP, VERSION, PLURAL, id="start")
@kopf.on.create(GROUP, VERSION, PLURAL, id="start")
async def start(
    spec: kopf.Spec,
    uid: str,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    body: kopf.Body,
    **_: Any,
) -> None:
    if status.get("phase") in _TERMINAL:
        return
    try:
        patch.status.update(await _reconciler(memo).start(uid, spec))
    except InvalidSpec as err:
        patch.status.update(invalid_status(str(err)))
        # an Event too (kopf posts no log lines as Events unless asked): `kubectl describe`
        kopf.warn(body, reason="InvalidSpec", message=str(err))
        raise kopf.PermanentError(str(err)) from None
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", id="act")
async def act(spec: kopf.Spec, uid: str, memo: kopf.Memo, **_: Any) -> None:
    try:
        await _reconciler(memo).act(uid, spec)
    except InvalidSpec as err:
        raise kopf.PermanentError(str(err)) from None
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None


@kopf.timer(GROUP, VERSION, PLURAL, id="mirror", interval=POLL_SECONDS, initial_delay=0.5)
async def mirror(
    spec: kopf.Spec, uid: str, status: kopf.Status, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """Mirror the run's log into the status, and carry the spec's decisions again (an
    ``act`` lost to a crash is repeated here; each decision is done once)."""
    if status.get("phase") in _TERMINAL:
        return
    reconciler = _reconciler(memo)
    try:
        with contextlib.suppress(InvalidSpec):
            await reconciler.act(uid, spec)
        seq = status.get("lastSeq")
        fresh = await reconciler.status(run_id_for(uid), seq if isinstance(seq, int) else None)
    except CorruptLogError as err:  # fenced until `wayline runs repair`; mirrored again after
        if status.get("phase") != "corrupt":
            patch.status.update({"phase": "corrupt", "message": err.message, "lastSeq": None})
        return
    except WorldError as err:
        log.warning("mirroring %s skipped: %s", uid, err)
        return
    if fresh is not None:
        patch.status.update(fresh)


@kopf.on.delete(GROUP, VERSION, PLURAL, id="stop")
async def stop(uid: str, memo: kopf.Memo, **_: Any) -> None:
    try:
        await _reconciler(memo).stop(uid)
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None


@kopf.on.resume(GROUP, VERSION, HOOK_PLURAL, id="deliver")
@kopf.on.create(GROUP, VERSION, HOOK_PLURAL, id="deliver")
async def deliver(
    spec: kopf.Spec, uid: str, status: kopf.Status, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """A ``WorkflowHook`` delivers its payload once; until its run reaches the hook it waits
    (``phase: waiting``), retried every few seconds."""
    if status.get("phase") in ("delivered", "failed"):
        return
    try:
        patch.status.update(await _reconciler(memo).deliver(uid, spec))
    except HookNotReady as err:
        patch.status.update({"phase": "waiting", "message": str(err)})
        raise kopf.TemporaryError(str(err), delay=HOOK_RETRY_SECONDS) from None
    except InvalidSpec as err:
        patch.status.update({"phase": "failed", "message": str(err)})
        raise kopf.PermanentError(str(err)) from None
    except WorldError as err:
        raise kopf.TemporaryError(str(err), delay=5) from None
