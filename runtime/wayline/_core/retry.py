"""``wayline.RetryPolicy``: how a failed step is tried again (Temporal's ``RetryPolicy``, DBOS's
``retries_allowed``/``interval_seconds``/``backoff_rate``).

The delay before attempt *n + 1* is ``initial * backoff ** (n - 1)``, capped at
``max_interval``, then spread by ``jitter``: multiplied by ``1 + jitter * u`` with ``u`` in
[-1, 1] drawn from a generator seeded with the step's idempotency key and the attempt number.
Both come from the log, so the schedule is the same in every process and on every replay, yet
steps that failed together do not all come back in the same instant.

The constructor also takes Temporal's field names (``maximum_attempts``, ``initial_interval``,
``backoff_coefficient``, ``maximum_interval``, ``non_retryable_error_types``) as keyword-only
aliases: they fill the same fields, so a policy written either way equals, prints and is
recorded in a step's definition identity exactly as the other.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from ..durations import Duration, to_seconds
from ..errors import ConfigurationError


class _Unset(enum.Enum):
    """A keyword not given (None is a value for ``max_interval``, so it cannot mean that)."""

    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET

OnExhausted = Literal["fail", "pause"]
EXHAUSTED = "exhausted"
"""A ``step_retrying``'s ``source`` when its attempts ran out and it paused the run
(``on_exhausted="pause"``): the step's next attempt starts a fresh budget."""


def _pick(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The value of one field given by its Wayline ``name`` or its Temporal ``alias``."""
    if value is not _UNSET and alias_value is not _UNSET:
        raise ConfigurationError(
            f"RetryPolicy: give {name}= or Temporal's {alias}=, not both (they are one field)"
        )
    if value is not _UNSET:
        return value
    if alias_value is not _UNSET:
        return alias_value
    # the defaults are the fields' own, written once in the class below
    return next(f.default for f in fields(RetryPolicy) if f.name == name)


# init=False: the constructor below also takes Temporal's names, yet the fields, equality, repr
# and dataclasses.replace() stay the dataclass's own.
@dataclass(frozen=True, slots=True, init=False)
class RetryPolicy:
    max_attempts: int = 4
    """Attempts in all, the first included (1: never retried)."""
    initial: Duration = 1.0
    """The delay before the second attempt."""
    backoff: float = 2.0
    """Each further delay is this many times the previous one (1.0: a fixed delay)."""
    max_interval: Duration | None = None
    """The longest delay between two attempts (None: no cap)."""
    jitter: float = 0.0
    """Spread each delay by up to this fraction either way (0.1: +-10%)."""
    non_retryable: tuple[type[BaseException] | str, ...] = field(default=())
    """Exception classes (or class names) that fail the step at once. A class matches its
    subclasses; a name matches any class of that name in the exception's MRO."""
    on_exhausted: OnExhausted = "fail"
    """What a retryable failure of the last attempt does: ``fail`` the step (its failure
    reaches the workflow), or ``pause`` the run, so a person can fix what the step calls and
    unpause it; the step then starts again with a fresh budget of ``max_attempts``. A
    non-retryable error fails the step either way."""

    def __init__(
        self,
        max_attempts: int | _Unset = _UNSET,
        initial: Duration | _Unset = _UNSET,
        backoff: float | _Unset = _UNSET,
        max_interval: Duration | _Unset | None = _UNSET,
        jitter: float = 0.0,
        non_retryable: tuple[type[BaseException] | str, ...] | _Unset = _UNSET,
        *,
        maximum_attempts: int | _Unset = _UNSET,
        initial_interval: Duration | _Unset = _UNSET,
        backoff_coefficient: float | _Unset = _UNSET,
        maximum_interval: Duration | _Unset | None = _UNSET,
        non_retryable_error_types: Sequence[str] | _Unset = _UNSET,
        on_exhausted: OnExhausted = "fail",
    ) -> None:
        if maximum_attempts == 0:
            # Temporal reads 0 as "retry for ever"; a Wayline step always has a last attempt,
            # after which its failure reaches the workflow, so 0 is refused, not guessed at.
            raise ConfigurationError(
                "RetryPolicy.maximum_attempts=0 means unlimited attempts in Temporal; Wayline "
                "needs a bound: give the number of attempts in all (>= 1)"
            )
        if isinstance(non_retryable_error_types, str):
            raise ConfigurationError(
                "RetryPolicy.non_retryable_error_types takes a list of names, not the string "
                f"{non_retryable_error_types!r}"
            )
        names = (
            non_retryable_error_types
            if non_retryable_error_types is _UNSET
            else tuple(non_retryable_error_types)
        )
        pairs = (
            ("max_attempts", max_attempts, "maximum_attempts", maximum_attempts),
            ("initial", initial, "initial_interval", initial_interval),
            ("backoff", backoff, "backoff_coefficient", backoff_coefficient),
            ("max_interval", max_interval, "maximum_interval", maximum_interval),
            ("non_retryable", non_retryable, "non_retryable_error_types", names),
        )
        for name, value, alias, alias_value in pairs:
            object.__setattr__(self, name, _pick(name, value, alias, alias_value))
        object.__setattr__(self, "jitter", jitter)
        object.__setattr__(self, "on_exhausted", on_exhausted)
        self.__post_init__()

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.max_attempts must be >= 1, not {self.max_attempts!r}"
            )
        if self.backoff < 1.0:
            raise ConfigurationError(f"RetryPolicy.backoff must be >= 1.0, not {self.backoff!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError(
                f"RetryPolicy.jitter must be within [0, 1], not {self.jitter!r}"
            )
        try:
            to_seconds(self.initial)
            if self.max_interval is not None:
                to_seconds(self.max_interval)
        except ValueError as err:
            raise ConfigurationError(f"RetryPolicy: {err}") from None
        if self.on_exhausted not in ("fail", "pause"):
            raise ConfigurationError(
                f"RetryPolicy.on_exhausted is 'fail' or 'pause', not {self.on_exhausted!r}"
            )
        if not isinstance(self.non_retryable, tuple):
            object.__setattr__(self, "non_retryable", tuple(self.non_retryable))
        for item in self.non_retryable:
            if not isinstance(item, str) and not (
                isinstance(item, type) and issubclass(item, BaseException)
            ):
                raise ConfigurationError(
                    f"RetryPolicy.non_retryable takes exception classes or names, not {item!r}"
                )

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1

    def delay(self, attempt: int, key: str) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) of the step keyed ``key``."""
        seconds = to_seconds(self.initial) * self.backoff ** max(0, attempt - 1)
        if self.max_interval is not None:
            seconds = min(seconds, to_seconds(self.max_interval))
        if self.jitter:
            u = random.Random(f"{key}#{attempt}").uniform(-1.0, 1.0)
            seconds *= 1.0 + self.jitter * u
        return max(0.0, seconds)

    def retryable(self, err: BaseException) -> bool:
        names = {cls.__name__ for cls in type(err).__mro__}
        for item in self.non_retryable:
            if isinstance(item, str):
                if item in names:
                    return False
            elif isinstance(err, item):
                return False
        return True

    def describe(self) -> dict[str, Any]:
        """The policy as the log records it (for ``runs show``)."""
        out: dict[str, Any] = {
            "maxAttempts": self.max_attempts,
            "initial": to_seconds(self.initial),
            "backoff": self.backoff,
        }
        if self.max_interval is not None:
            out["maxInterval"] = to_seconds(self.max_interval)
        if self.jitter:
            out["jitter"] = self.jitter
        if self.on_exhausted != "fail":
            out["onExhausted"] = self.on_exhausted
        return out
