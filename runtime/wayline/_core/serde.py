"""Values that cross the durable boundary: JSON, validated and rebuilt from annotations.

Workflow inputs, step arguments and results and hook payloads annotated with pydantic models,
dataclasses or other types pydantic understands are validated on the way back in and rebuilt
as those types. A value that cannot be written, or a stored value that no longer matches its
annotation, is a :class:`SerializationError` naming what it was and why.
"""

from __future__ import annotations

import inspect
import json
import math
import traceback
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, get_type_hints

import pydantic
import pydantic_core

from ..errors import ChildFailedError, SerializationError, StepFailedError, WaylineError
from . import limits

_PLAIN = (str, int, bool, type(None))


def _plain(value: Any) -> bool:
    """JSON as it stands: a str, int, bool, None or finite float, or a list of them."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(type(v) in _PLAIN or (type(v) is float and math.isfinite(v)) for v in value)
    return False


def encode(value: Any, *, what: str) -> Any:
    """A JSON-compatible copy of ``value``; raises naming ``what`` and the offending type."""
    if _plain(value):
        return list(value) if type(value) is list else value
    try:
        plain = pydantic_core.to_jsonable_python(value)
        json.dumps(plain, allow_nan=False)
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as err:
        raise SerializationError(
            f"{what} cannot be serialised: value of type {type(value).__qualname__} is not "
            f"JSON-compatible ({err})",
            type=type(value).__qualname__,
        ) from None
    return plain


_SCALAR_HINTS = frozenset({str, int, float, bool})


@lru_cache(maxsize=1024)
def _adapter(hint: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(hint)


def decode(value: Any, hint: Any, *, what: str) -> Any:
    """Validate a stored JSON value against ``hint`` and rebuild it (no-op without a hint)."""
    if hint is None or hint is Any or hint is inspect.Parameter.empty:
        return value
    if type(value) is hint and hint in _SCALAR_HINTS:
        return value  # what validation would return
    try:
        return _adapter(hint).validate_python(value)
    except pydantic.ValidationError as err:
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<value>'}: {e['msg']}" for e in err.errors()
        )
        raise SerializationError(
            f"{what} does not match {getattr(hint, '__name__', hint)}: {fields}"
        ) from None
    except (TypeError, pydantic.PydanticSchemaGenerationError):
        return value


class Signature:
    """The annotations of a user function, resolved once."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.sig = inspect.signature(fn)
        try:
            hints = get_type_hints(fn)
        except Exception:  # unresolvable forward references: validate nothing rather than fail
            hints = {}
        self.return_hint = hints.pop("return", None)
        self.params = hints
        simple = all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in self.sig.parameters.values()
        )
        self._names = list(self.sig.parameters) if simple else None
        """Parameter names when every one is positional without a default: a call with
        exactly that many positional arguments then needs no ``Signature.bind``."""

    def encode_args(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, what: str) -> Any:
        if kwargs or self._names is None or len(args) != len(self._names):
            try:
                self.sig.bind(*args, **kwargs)
            except TypeError as err:
                raise SerializationError(f"{what}: {err}") from None
        out: dict[str, Any] = {"args": encode(list(args), what=f"{what} arguments")}
        if kwargs:
            out["kwargs"] = encode(dict(kwargs), what=f"{what} arguments")
        return out

    def decode_args(self, stored: Any, *, what: str) -> tuple[list[Any], dict[str, Any]]:
        if not isinstance(stored, Mapping):
            stored = {"args": [] if stored is None else [stored]}
        args = list(stored.get("args") or [])
        kwargs = dict(stored.get("kwargs") or {})
        names = self._names
        if not kwargs and names is not None and len(args) == len(names):
            for i, name in enumerate(names):
                hint = self.params.get(name)
                if hint is not None:
                    args[i] = decode(args[i], hint, what=f"{what} argument {name!r}")
            return args, {}
        try:
            bound = self.sig.bind(*args, **kwargs)
        except TypeError as err:
            raise SerializationError(f"{what}: {err}") from None
        for name, value in list(bound.arguments.items()):
            hint = self.params.get(name)
            param = self.sig.parameters[name]
            if hint is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            bound.arguments[name] = decode(value, hint, what=f"{what} argument {name!r}")
        return list(bound.args), dict(bound.kwargs)


def error_message(exc: BaseException) -> str:
    """``str(exc)``, also for an exception whose ``__str__`` raises (user code)."""
    if isinstance(exc, WaylineError):
        return exc.message
    try:
        return str(exc)
    except Exception as err:  # a user __str__ that raises: the error is recorded all the same
        return f"<{type(exc).__qualname__}: str() raised {type(err).__qualname__}: {err}>"


def error_to_dict(exc: BaseException) -> dict[str, Any]:
    code = exc.code if isinstance(exc, WaylineError) else getattr(exc, "wayline_code", None)
    if not isinstance(code, str):  # a user attribute: only a string is a code the log can hold
        code = None
    out: dict[str, Any] = {
        "name": type(exc).__qualname__,
        "message": limits.clip(error_message(exc), limits.current().error),
        "code": code or "USER_ERROR",
        "stack": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }
    if isinstance(exc, StepFailedError):
        out["step"] = exc.step_name
    elif isinstance(exc, ChildFailedError):
        out["runId"] = exc.child_run_id
    if isinstance(exc, StepFailedError | ChildFailedError):
        out["cause"] = _cause(exc.error)  # the step's (or child's) own code reaches the caller
    return out


_CAUSE_TEXT = ("name", "code", "message", "step", "runId", "notRetriedBecause")
_CAUSE_NUMBERS = ("attempt", "attempts")


def _cause(error: Mapping[str, Any], depth: int = 4) -> dict[str, Any]:
    """A recorded error's name, code and message (and its own cause, ``depth`` levels at
    most), as strings, without its stack: the error of a run failed by a child of a child
    stays small, and one built by hand (``StepFailedError("s", {"message": exc})``) stays
    JSON."""
    out: dict[str, Any] = {k: str(error[k]) for k in _CAUSE_TEXT if error.get(k) is not None}
    out.update(
        (k, error[k])
        for k in _CAUSE_NUMBERS
        if isinstance(error.get(k), int) and not isinstance(error[k], bool)
    )
    if error.get("compensationAbandoned") is True:
        out["compensationAbandoned"] = True
    if "message" in out:
        out["message"] = limits.clip(out["message"], limits.current().error)
    if depth > 1 and isinstance(error.get("cause"), Mapping):
        out["cause"] = _cause(error["cause"], depth - 1)
    return out
