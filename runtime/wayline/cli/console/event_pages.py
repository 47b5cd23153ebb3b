"""A run's log a page at a time: a run of 50,000 steps has some 150,000 events, and
``GET /api/runs/{id}/events`` that sent them all made one response of some 25 MB
(issue #37, docs/console.md, "A run's events"). A request reads and sends at most
:data:`MAX_PAGE` events after the cursor ``after``, read from the world as a page
(``World.events_page``), never the whole log sliced.

An event's ``seq`` (1 the first) is its place in the log, which only grows at its end, so a
cursor (the ``seq`` of the last event a page sent) still names the same place after more
events were appended: a walk from cursor to cursor sees every event once and in order. The
sequence is dense, so the newest ``n`` events are the page after ``eventCount - n``: no
backward read is needed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.requests import Request

from ..._core.events import Event
from ...world import World
from ...world.blobs import PAYLOAD_KEYS, blob_ref, is_ref
from .errors import ApiError
from .payloads import read_whole

FIRST_PAGE = 1000
"""How many events an ``/events`` request answers when it does not say (``limit``): the
most one may ask for, so a client written before the pages (it sends no ``limit``) still gets
a run of up to 1,000 events (some 330 steps) whole, as before, and a cursor past that."""

MAX_PAGE = 1000
"""The most events one ``/events`` request may ask for: some 160 KB of JSON for a run of
small payloads, against 8.3 MB for the whole log of a run of 50,000 events (bench/RESULTS.md,
``bench/console_events.py``)."""

SEQ_DIGITS = 16
"""The longest cursor read: more digits than any log's length, and few enough that a
number of thousands of digits is refused before it is converted."""


def event_cursor(request: Request) -> int:
    """The ``after`` a page of events starts from, as given: 0, or a whole number of at most
    :data:`SEQ_DIGITS` ASCII digits (:func:`check_cursor` then holds it to the run's end)."""
    given = request.query_params.get("after") or "0"
    if not given.isascii() or not given.isdigit() or len(given) > SEQ_DIGITS:
        raise ApiError(
            400, "BAD_REQUEST", "after is not a cursor this server gave (an event's seq)"
        )
    return int(given)


def check_cursor(after: int, last_seq: int) -> None:
    """A cursor past the run's last event is no cursor this server gave: a typed 400, not an
    empty page that hides the mistake."""
    if after > last_seq:
        raise ApiError(
            400,
            "BAD_REQUEST",
            f"after is not a cursor this server gave (an event's seq, at most {last_seq})",
        )


async def archived_page(world: World, run_id: str, stored: list[Event]) -> list[Event]:
    """A page of an archived run's log (``wayline archive``) as ``World.archived_page`` reads
    it from the archive (that page alone, not the whole copy sliced), with each payload the
    copy keeps out of line read from its blob, as a live run's page gives it. A blob that is
    gone, or a reference no writer makes, is ``BlobMissingError`` (``409 CORRUPT_LOG``)."""
    page: list[Event] = []
    for event in stored:
        data = event.data
        for key in PAYLOAD_KEYS:
            if is_ref(data.get(key)):
                value = await read_whole(world, run_id, blob_ref(data[key], event.seq))
                data = {**data, key: value}
        page.append(event if data is event.data else replace(event, data=data))
    return page


def events_json(events: list[Event], last_seq: int) -> dict[str, Any]:
    """A page as ``/events`` sends it: ``{events, nextCursor, eventCount}``. ``last_seq`` is
    the run's last ``seq`` read after the page (:meth:`Console.events` reads them in that
    order), so it counts every event the page's read could see: ``nextCursor`` is null only
    when no event existed past the page when it was read, and a later read from the last
    event's ``seq`` finds what came since."""
    count = max(last_seq, events[-1].seq if events else 0)
    end = events[-1].seq if events else None
    return {
        "events": [e.to_json() for e in events],
        "nextCursor": str(end) if end is not None and end < count else None,
        "eventCount": count,
    }
