"""``wayline.Debounce``: starts of a workflow with the same key within a quiet period collapse
into one run, which begins once the period passed with no further start, with the last input.

    @wayline.workflow(debounce=wayline.Debounce(key=lambda doc: doc.id, period="30s"))
    async def reindex(doc: Doc) -> None: ...

The pending run is an ordinary run whose ``run_created`` records the key and period
(``debounce``); it is generation ``n`` of the business id ``debounce:<key>``, so every client
finds it the same way. A start that finds it not yet begun appends ``run_debounced`` with its
input (refused by the world once the run began: that start makes the next generation), and
the worker that receives the run's start message before the period has passed since its last
start hands it back until then. Everything is in the run's log, so a crash between starts
loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..durations import Duration, to_seconds
from ..errors import ConfigurationError
from . import limit_keys


@dataclass(frozen=True, slots=True)
class Debounce:
    period: Duration
    """The quiet period (``"30s"``, seconds): the run begins once this long passed after the
    last start with its key."""
    key: Callable[..., Any] | str | None = None
    """A function of the workflow's arguments giving the key, a constant string, or None: one
    key for the whole workflow."""

    def __post_init__(self) -> None:
        try:
            seconds = to_seconds(self.period)
        except ValueError as err:
            raise ConfigurationError(f"Debounce.period: {err}") from None
        if seconds <= 0:
            raise ConfigurationError(f"Debounce.period must be > 0, not {self.period!r}")
        if self.key is not None and not isinstance(self.key, str) and not callable(self.key):
            raise ConfigurationError(f"Debounce.key takes a function or a string, not {self.key!r}")

    @property
    def seconds(self) -> float:
        return to_seconds(self.period)

    def key_for(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
        return limit_keys.key_for(self.key, name, args, kwargs)
