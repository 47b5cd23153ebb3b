"""Payloads sent before the wait, on the worker's side (``wayline.world.hook_buffer``).

Right after the decision batch that creates hooks is written, each new hook takes the payload
buffered for its token in the run's namespace, if one waits (a redelivery looks again for every
hook still waiting), and the worker appends it as a
``hook_received`` whose delivery id is the entry's id, then wakes the run. The hook exists in
the log before the take, so a resumer that stores a payload after this take finds the hook
when it looks again, and takes and delivers the payload itself (``Client.resume_hook``):
whoever takes the entry delivers it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .._core.dispatch import FLOW_TOPIC
from .._core.events import EventType, NewEvent
from .._core.messages import WakeReason
from .._core.replay import HookRecord, Replay
from .._sdk.hooks import check_shape, validate
from ..errors import EntityConflictError, InvalidPayloadError, RunTerminalError
from ..world import World, flow_message
from ..world.hook_buffer import BufferedPayload
from ..world.sending import send

log = logging.getLogger("wayline.runtime")


def waiting_hooks(replay: Replay) -> list[HookRecord]:
    """The run's hooks that were written and have had no payload yet: what a redelivery
    looks for payloads for, in case the delivery before it died between writing a hook and
    taking its payload (a take finds nothing for a hook whose payload was taken)."""
    return [
        hook
        for hook in replay.hooks.values()
        if hook.created
        and not hook.payloads
        and not hook.disposed
        and hook.cid not in replay.new_hooks
    ]


def _refused(hook: HookRecord, entry: BufferedPayload) -> str | None:
    """Why a typed hook does not accept the buffered payload (None: it does). A payload
    buffered by ``Hook.resume`` was validated then; one buffered untyped is checked here, as
    a live resume is checked before it writes."""
    try:
        if hook.type_name is not None and isinstance(hook.hint, type):
            validate(hook.hint, entry.payload, hook.token)
        elif hook.shape is not None:
            check_shape(hook.shape, entry.payload, hook.token)
    except InvalidPayloadError as err:
        return err.message
    return None


async def take_buffered(
    world: World, run_id: str, namespace: str | None, hooks: Sequence[HookRecord]
) -> int:
    """Deliver to each of ``hooks`` (just created in ``run_id``'s log) the payload buffered
    for its token; returns how many were delivered."""
    store, delivered = world.hook_buffer(), 0
    for hook in hooks:
        entry = await store.take(namespace or "", hook.token, run_id)
        if entry is None:
            continue
        why = _refused(hook, entry)
        if why is not None:
            # given back, not dropped: it waits out its expiry for a hook that accepts it
            log.warning(
                "run %s: buffered payload %s not delivered: %s", run_id, entry.entry_id, why
            )
            await store.give_back(entry)
            continue
        data = {"payload": entry.payload, "deliveryId": entry.entry_id}
        try:
            await world.append(run_id, [NewEvent(EventType.HOOK_RECEIVED, hook.cid, data)])
        except (EntityConflictError, RunTerminalError):
            # the hook was disposed or the run ended since it was created: the payload is
            # given back for the next hook of its token, as a resume to no hook loses nothing
            await store.give_back(entry)
            continue
        key = f"{run_id}:hook:{hook.token}:{entry.entry_id}"
        await send(
            world, FLOW_TOPIC, flow_message(world, run_id, WakeReason.HOOK), idempotency_key=key
        )
        delivered += 1
    return delivered
