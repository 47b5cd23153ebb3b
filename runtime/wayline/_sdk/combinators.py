"""``wayline.any``: the first success among several durable awaitables (Promise.any).

Kept apart from ``gather``/``race`` because its name shadows the builtin."""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any, overload

from .._core.futures import WFuture
from ..errors import AllFailedError
from .context import current_replay
from .workflow_api import T1, T2, T3, T4, T5, T6, T, _as_future


# As for ``gather`` and ``race``: one overload per count up to six, then one shared type.
@overload
def any(a1: Awaitable[T1], /) -> WFuture[T1]: ...
@overload
def any(a1: Awaitable[T1], a2: Awaitable[T2], /) -> WFuture[T1 | T2]: ...
@overload
def any(a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], /) -> WFuture[T1 | T2 | T3]: ...
@overload
def any(
    a1: Awaitable[T1], a2: Awaitable[T2], a3: Awaitable[T3], a4: Awaitable[T4], /
) -> WFuture[T1 | T2 | T3 | T4]: ...
@overload
def any(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    /,
) -> WFuture[T1 | T2 | T3 | T4 | T5]: ...
@overload
def any(
    a1: Awaitable[T1],
    a2: Awaitable[T2],
    a3: Awaitable[T3],
    a4: Awaitable[T4],
    a5: Awaitable[T5],
    a6: Awaitable[T6],
    /,
) -> WFuture[T1 | T2 | T3 | T4 | T5 | T6]: ...
@overload
def any(*awaitables: Awaitable[T]) -> WFuture[T]: ...
def any(*awaitables: Awaitable[Any]) -> WFuture[Any]:
    """The value of the first awaitable to *succeed*, in log order; failures are passed over
    until every one has failed, then :class:`wayline.AllFailedError` carries them all (in
    argument order). The others keep running; their results are simply not awaited."""
    replay = current_replay("any")
    futures = [_as_future(replay, aw) for aw in awaitables]
    if not futures:
        raise ValueError("wayline.any needs at least one awaitable")
    out: WFuture[Any] = WFuture("any")
    failed: dict[int, BaseException] = {}

    def settle(index: int, fut: WFuture[Any]) -> None:
        if out.done():
            return
        exc = fut.exception()
        if exc is None:
            out.set_result(fut.result(), fut.order)
            return
        failed[index] = exc
        if len(failed) == len(futures):
            out.set_exception(AllFailedError([failed[i] for i in range(len(futures))]), fut.order)

    # Settle the already-done ones in log order first, so a replay decides the same way.
    done = sorted((f.order, i) for i, f in enumerate(futures) if f.done())
    for _, i in done:
        settle(i, futures[i])
    if not out.done():
        for i, fut in enumerate(futures):
            if not fut.done():
                fut.add_done_callback(functools.partial(settle, i))
    return out
