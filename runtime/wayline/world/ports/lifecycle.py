"""The lifecycle port: open and close a world, and check what it stands on (``wayline
doctor``)."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from ..checkup import Finding


class Lifecycle:
    """Start, close and check a world; ``async with world:`` starts and closes it."""

    url: str = ""

    async def start(self) -> None:
        """Create what the world needs (tables, streams), idempotently."""

    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def checkup(self, monitors: Sequence[str] = ()) -> list[Finding]:
        """What ``wayline doctor`` prints: whether this process can reach and use the store
        (address, credentials, TLS, limits) and whether the store fsyncs a write before it
        acknowledges it (``world.checkup``). Called on an unstarted world: it opens what it
        needs itself and creates nothing. What it finds is reported, not raised; it raises
        only for a bad argument (``monitors``: the NATS servers' monitoring URLs)."""
        return [Finding("world", "ok", f"{self.url}: this world has no checks")]

    async def sync_warning(self, monitors: Sequence[str] = ()) -> str | None:
        """On a started world, one line when the store acknowledges writes before they are on
        disk (a worker logs it at start); None when it fsyncs first or this world cannot tell.
        ``monitors`` as for :meth:`checkup`; an endpoint that does not answer raises
        :class:`WorldUnavailableError`."""
        return None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
