"""What ``wayline doctor`` and a starting worker learn about the store a world writes to.

A world answers two questions through the seam (``World.checkup``, ``World.sync_warning``):
can this process reach and use the store (address, credentials, TLS, limits), and does the
store acknowledge a write before it is on disk. The second matters because an acknowledged
append is a recorded step result, a hook payload or a cancel: a store that acknowledges before
fsync loses it in an OS crash or a power loss, and the step runs again (docs/nats.md, "What
each sync setting loses").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "warn", "fail"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's outcome: ``fail`` means the world cannot be used as it is; ``warn`` that it
    can, at a risk the detail names."""

    check: str
    level: Level
    detail: str

    def line(self) -> str:
        return f"{self.level:<4}  {self.check}: {self.detail}"


def lazy_sync_warning(store: str, setting: str, loses: str) -> str:
    """The one line a worker logs and ``wayline doctor`` prints for a store that acknowledges
    before fsync: what it is, what it loses, and the setting that closes the gap."""
    return f"{store} acknowledges writes before they are on disk ({setting}): {loses}"
