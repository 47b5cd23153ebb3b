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
    if 0 <= json_bound(value) <= limit:
        return
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > limit:
        raise PayloadTooLargeError(what, size, limit, _SETTING[kind])


_INT64 = 1 << 63
_WALK = 32
"""Values a bound looks at before it gives up: past this, encoding (in C) is cheaper."""


def json_bound(value: Any) -> int:
    """An upper bound on the bytes of ``value``'s compact JSON (``ensure_ascii``), or -1 when
    it cannot be told cheaply (a large or deep value: measure it by encoding). Most payloads
    are scalars, short strings and short lists of them (a step's arguments): measuring those
    by encoding would encode them twice."""
    budget = [_WALK]
    return _bound(value, budget)


def _bound(value: Any, budget: list[int]) -> int:
    budget[0] -= 1
    if budget[0] < 0:
        return -1
    kind = type(value)
    if value is None or kind is bool:
        return 5
    if kind is int:
        return 20 if -_INT64 <= value < _INT64 else -1
    if kind is float:
        return 24  # repr's longest, "-2.2250738585072014e-308"; inf and nan are shorter
    if kind is str:
        return len(value) * 12 + 2  # ensure_ascii: a character past U+FFFF is two \uXXXX
    if kind is list or kind is tuple:
        total = 2
        for item in value:
            size = _bound(item, budget)
            if size < 0:
                return -1
            total += size + 1
        return total
    if kind is dict:
        total = 2
        for key, item in value.items():
            if type(key) is not str:
                return -1
            size = _bound(item, budget)
            if size < 0:
                return -1
            total += len(key) * 12 + 2 + size + 2
        return total
    return -1


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, saying how much was left out."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[: max(0, limit - 40)].decode(errors="ignore")
    return f"{kept}... [{len(data) - len(kept.encode())} more bytes]"
