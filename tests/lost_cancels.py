"""A cancel lost as an awaited call completes (``asyncio.wait_for`` before Python 3.12, which
the NATS client uses), played on purpose: the tests of loops that only a cancel ends."""

from __future__ import annotations

import asyncio
from typing import Any


def losing_its_cancel(call: Any, in_call: asyncio.Event) -> Any:
    """``call``, except that its first call sets ``in_call`` and swallows the cancel that
    comes while it runs (as a call that completed just as the cancel came)."""

    async def losing(*args: Any, **kwargs: Any) -> Any:
        if not in_call.is_set():
            in_call.set()
            try:
                await asyncio.sleep(5.0)
            except asyncio.CancelledError:
                pass  # the call completed as the cancel came: the cancel is gone
        return await call(*args, **kwargs)

    return losing


async def ends_on_its_cancel(task: asyncio.Task[Any], in_call: asyncio.Event, what: str) -> None:
    """Cancel ``task`` once it is in the losing call: it ends, cancelled, within 10 s (else
    a second cancel ends it, and ``what`` is the failure)."""
    await asyncio.wait_for(in_call.wait(), 30)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:
        task.cancel()  # a second Ctrl-C
        await asyncio.wait({task})
    assert done, what
    assert task.cancelled()
