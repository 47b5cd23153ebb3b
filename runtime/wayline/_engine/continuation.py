"""The end of a run that continues as new, and the start of its next run (see
``_core.continuation`` for what carries over).

The end is written first, naming the next run and recording its ``run_created`` data; the next
run is created from that record and its start sent, before the delivery that wrote the end is
acked. A delivery that dies in between leaves its message to be delivered again: that delivery
finds the run ended ``continued_as_new`` (``Handler`` hands it to :func:`start_next`) and
creates the same next run from the same record, or finds it created and sends its start again
under the same key. So no crash loses the continuation, and none makes two of it.
"""

from __future__ import annotations

import logging

from .._core.continuation import ContinueAsNew, next_run_data
from .._core.events import EventType, NewEvent
from .._core.messages import WakeReason
from .._core.projections import NEXT_RUN_ID, RunContinuedAsNew, payload
from .._core.replay import Replay
from .._core.serde import error_to_dict
from ..errors import EntityConflictError, SequenceConflictError, SerializationError
from ..world import FLOW_TOPIC, RunInfo, World, flow_message
from ..world.sending import send
from .ending import terminal

log = logging.getLogger("wayline.runtime")


async def continue_as_new(world: World, replay: Replay, signal: ContinueAsNew) -> None:
    """End the run ``continued_as_new`` and start its next run. An input the next run could
    not decode fails the run instead, with the serializer's error, as a bad ``Client.start``
    input is refused: nothing is lost, the run's log keeps what it did."""
    workflow = replay.workflow
    try:
        stored = workflow.encode_input(signal.next_args, signal.next_kwargs)
    except SerializationError as err:
        failed = NewEvent(EventType.RUN_FAILED, data={"error": error_to_dict(err)})
        await terminal(world, replay.run_id, failed, replay)
        return
    next_id, data = next_run_data(
        replay.run_id,
        replay.created,
        workflow=workflow.name,
        stored_input=stored,
        revision=workflow.revision,
        definition=workflow.identity_record() if signal.keep_version else None,
        search=replay.search,
    )
    end = NewEvent(EventType.RUN_CONTINUED_AS_NEW, data={NEXT_RUN_ID: next_id, "next": data})
    await terminal(world, replay.run_id, end, replay)
    info = await world.get_run(replay.run_id)
    if info is not None:
        await start_next(world, info)


async def start_next(world: World, info: RunInfo) -> None:
    """Create the next run of ``info`` (a run that ended ``continued_as_new``) from its end
    event's record, unless it exists, and send its start; nothing for any other run."""
    next_id = info.continued_as
    if next_id is None:
        return
    last = await world.list_events(info.run_id, after_seq=info.last_seq - 1)
    end = payload(last[-1]) if last and last[-1].type is EventType.RUN_CONTINUED_AS_NEW else None
    if not isinstance(end, RunContinuedAsNew) or end.next_run_id != next_id:
        log.error("run %s continued as new, but its last event does not say how", info.run_id)
        return
    created = True
    try:
        await world.append(
            next_id, [NewEvent(EventType.RUN_CREATED, data=dict(end.next))], expected_seq=0
        )
    except (EntityConflictError, SequenceConflictError):
        created = False  # created by the delivery before this one, which died after it
    start = flow_message(world, next_id, WakeReason.START, after_own_append=created)
    await send(world, FLOW_TOPIC, start, idempotency_key=f"{next_id}:start", recoverable=True)
    if created:
        log.info(
            "run %s continued as new: %s",
            info.run_id,
            next_id,
            extra={"run_id": info.run_id, "workflow": info.workflow},
        )
