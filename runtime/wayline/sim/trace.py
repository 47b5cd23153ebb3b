"""A seed's trace: one line per thing that happened, stamped with virtual time, so that two
runs of one seed can be compared byte for byte and a failing seed read in order."""

from __future__ import annotations

from collections.abc import Callable


class Trace:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.lines: list[str] = []

    def note(self, what: str) -> None:
        self.lines.append(f"{self._now():12.3f} {what}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
