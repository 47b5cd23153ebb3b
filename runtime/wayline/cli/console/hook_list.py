"""A run's hooks a page at a time: a run that makes a hook in each iteration of a loop may
make thousands, and a run's JSON that carried each of them (its token, times, metadata and
first payload) grew with every one (issue #37, docs/console.md, "Runs with many hooks"). The
run's JSON carries the first :data:`HEAD_HOOKS` and the last :data:`TAIL_HOOKS` hooks, those
waiting for a payload among the rest up to :data:`WAITING_HOOKS`, and ``hookCount``;
``GET /api/runs/{id}/hooks`` pages through them all.

A hook's number ``n`` (0 the first) is its place among the run's hooks in the order they were
made, which only grows at its end, so a cursor (the number of the next hook) still names the
same hook after more were made: a walk from cursor to cursor sees every hook once and in
order."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ..._core.projections import HookView
from ...world import World
from .errors import ApiError
from .hook_pages import bounded_hook, carried
from .payloads import PAYLOAD_NUMBER_DIGITS

HEAD_HOOKS = 50
"""How many of a run's first hooks its JSON carries: a run of a few dozen hooks (a workflow
that waits on a handful of approvals, or a short loop) needs no second request. With
:data:`TAIL_HOOKS` and :data:`WAITING_HOOKS` a run's JSON carries at most 110 hooks, some
50 KB of metadata and times, and their payloads within ``hook_pages.RUN_PAYLOADS``."""

TAIL_HOOKS = 10
"""How many of a run's last hooks its JSON carries too: a loop's newest hook (the one it
waits on now) shows at once, as a busy hook's last payloads do (``hook_pages.TAIL_PAYLOADS``)."""

WAITING_HOOKS = 50
"""How many hooks between the first and the last that still wait for a payload the run's JSON
carries as well: the run page's forms answer them, so a run waiting on many hooks at once
shows that many forms; past this many, the rest are on the Hooks page (``/api/hooks``)."""

FIRST_PAGE = 200
"""How many hooks a ``/hooks`` request answers when it does not say (``limit``)."""

MAX_PAGE = 1000
"""The most hooks one ``/hooks`` request may ask for: a page's payloads share one budget
(``hook_pages.RUN_PAYLOADS``), so a page is some 1 MB of JSON at most past its hooks' own
first payloads (each at most 4 KiB inline)."""


def shown_hooks(hooks: list[HookView]) -> list[int]:
    """The numbers of the hooks the run's JSON carries, in order: the first
    :data:`HEAD_HOOKS`, the waiting ones among the rest (at most :data:`WAITING_HOOKS`),
    and the last :data:`TAIL_HOOKS`."""
    head = min(len(hooks), HEAD_HOOKS)
    tail_from = max(head, len(hooks) - TAIL_HOOKS)
    waiting = [n for n in range(head, tail_from) if hooks[n].status == "waiting"]
    return [*range(head), *waiting[:WAITING_HOOKS], *range(tail_from, len(hooks))]


async def hooks_json(
    world: World, run_id: str, hooks: list[HookView], numbers: list[int]
) -> list[dict[str, Any]]:
    """The hooks of those ``numbers`` as the run's JSON and ``/hooks`` send them, each with
    its number ``n``: their payloads are chosen within one budget (``hook_pages.carried``)."""
    chosen = [hooks[n] for n in numbers]
    shares = carried(chosen)
    return [
        {**await bounded_hook(world, run_id, hooks[n], *shares[hooks[n].cid]), "n": n}
        for n in numbers
    ]


def next_hook_cursor(hooks: list[HookView], numbers: list[int]) -> str | None:
    """The number of the first hook the run's JSON leaves out (null when it carries all)."""
    left_out = next((n for n, m in enumerate(numbers) if n != m), None)
    if left_out is None:
        return str(len(numbers)) if len(numbers) < len(hooks) else None
    return str(left_out)


def hook_cursor(request: Request, hooks: list[HookView]) -> int:
    """The ``after`` a page of hooks starts from: 0, or a cursor this server gave (a
    ``nextHookCursor`` or ``nextCursor``); one past the run's hooks is a typed 400."""
    given = request.query_params.get("after") or "0"
    if (
        not given.isascii()
        or not given.isdigit()
        or len(given) > PAYLOAD_NUMBER_DIGITS
        or int(given) > len(hooks)
    ):
        raise ApiError(
            400, "BAD_REQUEST", "after is not a cursor this server gave (nextHookCursor)"
        )
    return int(given)


async def hook_page(
    world: World, run_id: str, hooks: list[HookView], after: int, limit: int
) -> dict[str, Any]:
    """``limit`` hooks of the run from number ``after``, with the count and the next page's
    cursor (null at the end)."""
    end = min(len(hooks), after + limit)
    return {
        "hooks": await hooks_json(world, run_id, hooks, list(range(after, end))),
        "hookCount": len(hooks),
        "nextCursor": str(end) if end < len(hooks) else None,
    }
