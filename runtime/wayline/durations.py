"""Durations: seconds, a ``timedelta``, or strings such as ``"10s"``, ``"1h30m"``, ``"250ms"``."""

from __future__ import annotations

import re
from datetime import timedelta

Duration = float | int | timedelta | str

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def to_seconds(value: Duration) -> float:
    """Convert a duration to seconds, raising ``ValueError`` with the offending value."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if not text:
            raise ValueError("not a duration: empty string")
        try:
            seconds = float(text)
        except ValueError:
            pos = 0
            seconds = 0.0
            for match in _PART.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNITS[match.group(2)]
                pos = match.end()
            if pos != len(text):
                raise ValueError(
                    f"not a duration: {value!r} (use e.g. 30, '10s', '1h30m', '250ms')"
                ) from None
    else:
        raise ValueError(f"not a duration: {value!r}")
    if seconds != seconds or seconds < 0:  # NaN or negative
        raise ValueError(f"a duration must be a non-negative number of seconds: {value!r}")
    return seconds
