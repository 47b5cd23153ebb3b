"""How long one run's log may grow: a warning past ``WAYLINE_HISTORY_WARN_EVENTS``, a failure
past ``WAYLINE_HISTORY_LIMIT_EVENTS`` (Temporal's 10,240 and 51,200 events).

A log is read whole by every replay that starts from the log (a worker restart, a rebuild, a
step delivery on another worker): a workflow that loops for ever should end its log with
``wayline.continue_as_new`` long before it is that large. The warning is one ``history_large``
event, appended fenced on the log as the replay read it, so that two deliveries racing to
record it record it once (the second one's fence fails; it catches up and finds it), and one
count of ``wayline_histories_large``. The failure ends the run as a worker's failure
(``fail_run(by="worker")``), whose error names the limit and ``continue_as_new``.
"""

from __future__ import annotations

import logging

from .. import metrics
from .._core.events import EventType, NewEvent
from ..errors import RunTerminalError, SequenceConflictError
from .ending import fail_run
from .session import RunSession

log = logging.getLogger("wayline.runtime")

LIMIT_CODE = "HISTORY_LIMIT_EXCEEDED"


async def check(session: RunSession) -> bool:
    """Warn about (once) or fail a run whose log is past the settings' sizes; True when the
    run was failed here and the delivery has nothing more to do with it."""
    replay, settings = session.replay, session.settings
    events = replay.last_seq
    limit = settings.history_limit_events
    if limit and events >= limit and replay.terminal is None:
        await session.flush()
        message = (
            f"the run's log has {events} events, past WAYLINE_HISTORY_LIMIT_EVENTS={limit}; "
            "a workflow that runs this long ends its log with wayline.continue_as_new(...)"
        )
        metrics.HISTORY_LIMIT_FAILURES.inc()
        await fail_run(
            session.world, replay.run_id, LIMIT_CODE, message, by="worker", events=events
        )
        return True
    warn = settings.history_warn_events
    if not warn or events < warn or replay.history_warned or replay.terminal is not None:
        return False
    await session.flush()  # a completion carried provisionally is written first (once a run)
    events = replay.last_seq
    large = NewEvent(EventType.HISTORY_LARGE, data={"events": events, "threshold": warn})
    try:
        written = await session.world.append(replay.run_id, [large], expected_seq=events)
    except SequenceConflictError:
        await session.catch_up()  # another delivery may have recorded it: read again
        return False
    except RunTerminalError:
        return False
    metrics.HISTORIES_LARGE.inc()
    log.warning(
        "run %s: its log has %d events, past WAYLINE_HISTORY_WARN_EVENTS=%d; end it with "
        "wayline.continue_as_new(...) (it fails at WAYLINE_HISTORY_LIMIT_EVENTS=%s)",
        replay.run_id,
        events,
        warn,
        limit or "off",
        extra={"run_id": replay.run_id, "workflow": replay.workflow.name},
    )
    await session.feed(written)
    return False
