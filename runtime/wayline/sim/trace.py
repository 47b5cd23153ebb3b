"""A seed's trace: one line per thing that happened, stamped with virtual time, so that two
runs of one seed can be compared byte for byte and a failing seed read in order."""

from __future__ import annotations

from collections.abc import Callable


class Trace:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._notes: list[tuple[float, str]] = []
        """Each note with its time, formatted only when the trace is read: most seeds pass,
        and nobody reads their trace."""

    def note(self, what: str) -> None:
        self._notes.append((self._now(), what))

    @property
    def lines(self) -> list[str]:
        return [f"{at:12.3f} {what}" for at, what in self._notes]

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
