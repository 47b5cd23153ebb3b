"""A run's steps a page at a time: ``GET /api/runs/{id}`` sends the first page with the count
and a cursor, ``GET /api/runs/{id}/steps`` the pages after it, so a run of thousands of steps
reaches the browser in pieces it can draw (docs/console.md, "Long runs"). A step result too
large to be worth inlining is replaced by its size, its first KiB and a link that streams it
(``GET /api/runs/{id}/steps/{step}/result``), from the blob store when it is stored there.

The steps are folded from the log as stored: a result kept in a blob is its reference there,
so a page of steps measures it by the reference and reads its first KiB alone."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ...world import World
from .errors import ApiError
from .payloads import inline_or_link

FIRST_PAGE = 200
"""How many steps the run itself carries: a run this short needs no second request, and the
page's first screen (some 30 rows) is filled with room to spare."""

MAX_PAGE = 1000
"""The most steps one ``/steps`` request may ask for: about 300 KB of JSON for plain steps."""

RESULT_INLINE_BYTES = 4096
"""The largest step result, as JSON, sent with its step. A larger one is sent as its size,
its first KiB and a link (``resultPayload``): five thousand steps of large results would
otherwise make one page of several hundred megabytes."""

STEP_ID_CHARS = 200
"""The longest step id a result link may name: ids are short (``s12``), so a longer one is a
link this server never gave."""


def step_cursor(request: Request) -> int:
    """The ``after`` a page of steps starts from: 0, or a ``nextCursor`` this server gave."""
    given = request.query_params.get("after") or "0"
    if not given.isascii() or not given.isdigit() or len(given) > 9:
        raise ApiError(400, "BAD_REQUEST", "after is not a cursor this server gave (nextCursor)")
    return int(given)


async def page_of(
    world: World, run_id: str, steps: list[dict[str, Any]], after: int, limit: int
) -> dict[str, Any]:
    """``limit`` steps from position ``after``, with the count and the next page's cursor
    (None at the end). The cursor is a position in the log's order of steps, which only grows
    at its end, so a page read later still follows on from the one before it."""
    page = [await clipped(world, run_id, step) for step in steps[after : after + limit]]
    end = after + len(page)
    cursor = str(end) if end < len(steps) else None
    return {"steps": page, "stepCount": len(steps), "nextCursor": cursor}


async def clipped(world: World, run_id: str, step: dict[str, Any]) -> dict[str, Any]:
    """The step with a result over :data:`RESULT_INLINE_BYTES` replaced by ``resultBytes``
    and ``resultPayload`` (``{bytes, preview, href}``); a smaller one kept in a blob is read."""
    href = f"/api/runs/{run_id}/steps/{step['id']}/result"
    value, linked = await inline_or_link(
        world, run_id, step.get("result"), href, RESULT_INLINE_BYTES
    )
    if linked is not None:
        return {**step, "result": None, "resultBytes": linked["bytes"], "resultPayload": linked}
    return {**step, "result": value, "resultPayload": None}


def step_of(steps: list[dict[str, Any]], step_id: str) -> dict[str, Any]:
    """The step whose id is ``step_id``; a typed 4xx for an id no step of the run has."""
    if not step_id or len(step_id) > STEP_ID_CHARS or not step_id.isascii():
        raise ApiError(400, "BAD_REQUEST", "step is not a step id of this run (a step's id)")
    for step in steps:
        if step["id"] == step_id:
            return step
    raise ApiError(404, "STEP_NOT_FOUND", f"the run has no step {step_id!r}")


def occurrences(steps: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The steps called ``name``, in the log's order: the rows of a group (``?group=``)."""
    return [step for step in steps if step["name"] == name]


def groups_of(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step name the run called more than once (a step in a loop), in the order of its
    first call, with how many times and how many of them are in each status: the timeline
    shows each as one row (charge, 500 times: 498 completed, 1 failed, 1 running) instead of
    500 rows that say the same thing."""
    by_name: dict[str, dict[str, Any]] = {}
    for position, step in enumerate(steps):
        group = by_name.setdefault(
            step["name"], {"name": step["name"], "count": 0, "first": position, "statuses": {}}
        )
        group["count"] += 1
        statuses = group["statuses"]
        statuses[step["status"]] = statuses.get(step["status"], 0) + 1
    return [group for group in by_name.values() if group["count"] > 1]
