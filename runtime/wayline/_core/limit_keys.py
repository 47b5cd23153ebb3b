"""The key a call of a workflow or step counts under, for the limits that take a ``key=``
(``wayline.Limit``'s slots, ``wayline.RateLimit``'s buckets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def key_for(
    key: Callable[..., Any] | str | None, name: str, args: list[Any], kwargs: dict[str, Any]
) -> str:
    """``<name>:<key>``: the key function's answer for these arguments, the constant string,
    or ``*`` (no key: one for the whole workflow or step)."""
    if key is None:
        part = "*"
    elif isinstance(key, str):
        part = key
    else:
        part = str(key(*args, **kwargs))
    return f"{name}:{part}"
