"""Size limits on the values that cross the durable boundary, checked before anything is
written (see ``Settings``: ``max_input_bytes`` and the others).

A value is measured as the compact JSON Wayline stores. The limits in force are the
:class:`Limits` of the settings the Worker or Client was given; a Worker installs its own in
the context its tasks (and so its step bodies) inherit, so two workers in one process keep
their own.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..errors import PayloadTooLargeError

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class Limits:
    """The defaults are ``Settings``'s (64 MiB a payload: values over the inline threshold are
    stored out of line, see ``wayline.world.blobs``)."""

    input: int = 64 * MIB
    step_args: int = 64 * MIB
    result: int = 64 * MIB
    hook_payload: int = 64 * MIB
    error: int = 8 * KIB


_DEFAULT = Limits()
_current: ContextVar[Limits | None] = ContextVar("wayline_limits", default=None)


def current() -> Limits:
    return _current.get() or _DEFAULT


def install(limits: Limits) -> None:
    """Make ``limits`` the ones in force in this context (and the tasks it creates)."""
    _current.set(limits)


_SETTING = {
    "input": "WAYLINE_MAX_INPUT_BYTES",
    "step_args": "WAYLINE_MAX_STEP_ARGS_BYTES",
    "result": "WAYLINE_MAX_RESULT_BYTES",
    "hook_payload": "WAYLINE_MAX_HOOK_PAYLOAD_BYTES",
}


def check(value: Any, kind: str, what: str, limits: Limits | None = None) -> None:
    """Raise :class:`PayloadTooLargeError` when the stored form of ``value`` is over the
    ``kind`` limit (``input``, ``step_args``, ``result``, ``hook_payload``)."""
    limit: int = getattr(limits or current(), kind)
    if not _maybe_over(value, limit):
        return
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > limit:
        raise PayloadTooLargeError(what, size, limit, _SETTING[kind])


def _maybe_over(value: Any, limit: int) -> bool:
    """Cheap: False when ``value`` cannot be over ``limit`` whatever it holds (most step
    results are small scalars, and measuring means encoding them twice)."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float:
        return False  # an int's digits are capped by the interpreter at 4300
    if kind is str:
        return len(value) * 6 + 2 > limit  # \\uXXXX is the longest escape
    return True


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, saying how much was left out."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[: max(0, limit - 40)].decode(errors="ignore")
    return f"{kept}... [{len(data) - len(kept.encode())} more bytes]"
