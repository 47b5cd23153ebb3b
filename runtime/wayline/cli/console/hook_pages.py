"""A hook's payloads a page at a time: a hook that takes payloads in a loop (``async for`` over
it, a stream-like hook) may receive thousands, and a run's JSON that carried each of them made
a run page of megabytes that froze the browser (issue #37, docs/console.md, "Hooks with many
payloads"). The run's JSON carries the first :data:`HEAD_PAYLOADS` and the last
:data:`TAIL_PAYLOADS` of each hook with their count; ``GET /api/runs/{id}/hooks/{hook}/payloads``
pages through the rest.

A payload's number (0 the first) is its place in the hook's list, which only grows at its
end, so a cursor (the number of the next payload) still names the same payload after more
have arrived: a walk from cursor to cursor sees every payload once and in order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from starlette.requests import Request

from ..._core.projections import HookView
from ...world import World
from .errors import ApiError
from .payloads import HOOK_PAYLOAD_INLINE_BYTES, PAYLOAD_NUMBER_DIGITS, inline_or_link

HEAD_PAYLOADS = 50
"""How many of a hook's first payloads the run's JSON carries (the first, in ``payload``, and
the next ones, in ``later``): a hook of a few dozen payloads needs no second request."""

TAIL_PAYLOADS = 10
"""How many of a hook's last payloads the run's JSON carries too (``lastPayloads``), so the
run page shows the newest payload of a busy hook at once. With :data:`HEAD_PAYLOADS` a hook
adds at most 60 payloads to the run's JSON, some 250 KB when each is near the 4 KiB inlined,
whatever it received."""

RUN_PAYLOADS = 240
"""How many payloads the run's JSON carries of all its hooks together, past each hook's first
(its ``payload``): a run that makes hooks in a loop, each resumed many times, would otherwise
carry :data:`HEAD_PAYLOADS` and :data:`TAIL_PAYLOADS` of every hook, megabytes for a few
hundred busy hooks. Four busy hooks are carried as one alone is; the hooks past the budget carry
their first payload and page through the rest, so a hook adds one payload to the run's JSON (at
most 4 KiB inline), as it adds its token and times."""

FIRST_PAGE = 200
"""How many payloads a ``/payloads`` request answers when it does not say (``limit``)."""

MAX_PAGE = 1000
"""The most payloads one ``/payloads`` request may ask for: at most about 4 MB of JSON, since
a payload over 4 KiB is sent as its first KiB and a link."""


def received(hook: HookView) -> list[tuple[float, Any]]:
    """The hook's payloads as ``(received at, payload as stored)``, in the order they came."""
    if hook.received_at is None:
        return []
    return [(hook.received_at, hook.payload), *hook.later]


async def payload_row(
    world: World, run_id: str, hook_id: str, n: int, at: float, stored: Any
) -> dict[str, Any]:
    """Payload ``n`` of the hook as a row: ``{n, receivedAt, payload, payloadPayload}``; one
    over 4 KiB is null with ``payloadPayload`` ``{bytes, preview, href}``."""
    href = f"/api/runs/{run_id}/hooks/{hook_id}/payloads/{n}"
    value, linked = await inline_or_link(world, run_id, stored, href, HOOK_PAYLOAD_INLINE_BYTES)
    return {"n": n, "receivedAt": at, "payload": value, "payloadPayload": linked}


def carried(hooks: Iterable[HookView]) -> dict[str, tuple[int, int]]:
    """How many of each hook's first and last payloads the run's JSON carries, by the hook's
    id: :data:`HEAD_PAYLOADS` and :data:`TAIL_PAYLOADS` while the run's budget
    (:data:`RUN_PAYLOADS`) lasts, taken by the hooks in the order they were made; then what is
    left of it, and past it the first payload alone. The run's story prints the same ones."""
    left = RUN_PAYLOADS
    shares: dict[str, tuple[int, int]] = {}
    for hook in hooks:
        # the first payload is the hook's own (``payload``), carried whatever the budget
        wanted = max(0, min(len(received(hook)), HEAD_PAYLOADS + TAIL_PAYLOADS) - 1)
        if wanted <= left:
            shares[hook.cid] = (HEAD_PAYLOADS, TAIL_PAYLOADS)
            left -= wanted
        else:
            shares[hook.cid] = (1 + left, 0)
            left = 0
    return shares


async def bounded_hook(
    world: World,
    run_id: str,
    hook: HookView,
    head_payloads: int = HEAD_PAYLOADS,
    tail_payloads: int = TAIL_PAYLOADS,
) -> dict[str, Any]:
    """The hook as the run's JSON sends it: its first payload in ``payload``, the next ones
    up to ``head_payloads`` in ``later``, the last ``tail_payloads`` past those in
    ``lastPayloads``, with ``payloadCount`` and ``nextPayloadCursor``: the cursor of the first
    payload not sent (null when every one is), for ``/payloads?after=``. The two counts are
    the hook's share of the run's budget (:func:`carried`)."""
    out = replace(hook, later=[]).to_json()  # the later ones are chosen below
    rows = received(hook)
    head = min(len(rows), head_payloads)
    tail_from = max(head, len(rows) - tail_payloads)
    shown = [
        await payload_row(world, run_id, hook.cid, n, *rows[n])
        for n in (*range(head), *range(tail_from, len(rows)))
    ]
    first = shown[0] if shown else {"payload": hook.payload, "payloadPayload": None}
    out.update(
        payload=first["payload"],
        payloadPayload=first["payloadPayload"],
        later=shown[1:head],
        lastPayloads=shown[head:],
        payloadCount=len(rows),
        nextPayloadCursor=str(head) if head < tail_from else None,
    )
    return out


def payload_cursor(request: Request, hook: HookView) -> int:
    """The ``after`` a page of payloads starts from: 0, or a cursor this server gave (a
    ``nextPayloadCursor`` or ``nextCursor``). A cursor past the payloads the hook has is no
    cursor this server gave: a typed 400, not an empty page that hides the mistake."""
    given = request.query_params.get("after") or "0"
    if (
        not given.isascii()
        or not given.isdigit()
        or len(given) > PAYLOAD_NUMBER_DIGITS
        or int(given) > len(received(hook))
    ):
        raise ApiError(
            400, "BAD_REQUEST", "after is not a cursor this server gave (nextPayloadCursor)"
        )
    return int(given)


async def payload_page(
    world: World, run_id: str, hook: HookView, after: int, limit: int
) -> dict[str, Any]:
    """``limit`` payloads of the hook from number ``after``, with the count and the next
    page's cursor (null at the end: a later read from the count's cursor finds what came
    since)."""
    rows = received(hook)
    end = min(len(rows), after + limit)
    page = [await payload_row(world, run_id, hook.cid, n, *rows[n]) for n in range(after, end)]
    return {
        "payloads": page,
        "payloadCount": len(rows),
        "nextCursor": str(end) if end < len(rows) else None,
    }
