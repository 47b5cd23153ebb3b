"""The plain values of a typed hook's recorded shape: a field that is a ``Literal[...]`` (its
``values``), and a list of plain values (``list[int]``, ``list[int | str]``,
``list[Literal[...]]``: its item's JSON ``kinds``, and ``values`` for a literal). The console
builds a form from them (a choice of the values, a list whose items are typed inputs) and the
server refuses a payload that breaks them by the shape alone, where the class is not at hand.

A shape is read from a log that anyone able to write the world can write: each part that is not
what :func:`literal_values` or :func:`plain_element` make is passed over, never a failure."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Literal, TypeGuard, Union

JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}

PLAIN_KINDS = ("string", "integer", "number", "boolean", "null")
"""The JSON types a form input holds: a list of these gets a typed input per item."""

MAX_VALUES = 200
"""The most values a literal's recorded choice lists: a longer one is checked where the class
is (the form takes it as text), so a shape stays small."""


def kind_of(value: Any) -> str:
    """The JSON type ``value`` is, as a schema names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object"


def literal_values(options: list[Mapping[str, Any]]) -> list[Any] | None:
    """The values a property's options allow when every one is a ``const`` or an ``enum`` of
    plain values (``Literal[...]``, maybe ``Optional``: null then is one of them); None for
    anything else, and for a choice longer than :data:`MAX_VALUES`."""
    values: list[Any] = []
    for option in options:
        if option.get("type") == "null":
            values.append(None)
        elif "const" in option:
            values.append(option["const"])
        elif isinstance(option.get("enum"), list):
            values += option["enum"]
        else:
            return None
    if not values or len(values) > MAX_VALUES:
        return None
    if not all(kind_of(v) in PLAIN_KINDS for v in values):
        return None
    return list(values)


def kinds_of(options: list[Mapping[str, Any]]) -> list[str] | None:
    """The JSON types a property's options allow, in order; a literal's from its values (an
    ``enum`` of mixed types has no ``type``); None where one of them names no JSON type."""
    values = literal_values(options)
    if values is not None:
        return list(dict.fromkeys(kind_of(v) for v in values))
    kinds = [o.get("type") for o in options]
    if all(isinstance(k, str) and k in JSON_TYPES for k in kinds):
        return list(dict.fromkeys(str(k) for k in kinds))
    return None


def plain_element(options: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What a list's item is when it is a plain value: ``{"kinds": [...]}``, with ``values``
    for a literal; None for anything else (an item that is a model is recorded elsewhere)."""
    kinds = kinds_of(options)
    if kinds is None or not all(k in PLAIN_KINDS for k in kinds):
        return None
    out: dict[str, Any] = {"kinds": kinds}
    values = literal_values(options)
    if values is not None:
        out["values"] = values
    return out


def kind_problem(kinds: Any, value: Any, at: str) -> str | None:
    """Why ``value`` is none of ``kinds`` (JSON types, as recorded), or None when it is one, or
    when ``kinds`` is not a list of JSON types. A value is judged as pydantic judges it for
    the class's field (lax: ``"5"``, ``5.0`` and ``True`` are integers there), so that a
    console without the class refuses no payload the class, and the workflow, would take."""
    if not isinstance(kinds, list) or not kinds:
        return None
    if not all(isinstance(k, str) and k in JSON_TYPES for k in kinds):
        return None
    if _json_kind(value) in kinds or _passes(tuple(kinds), value):
        return None  # a value of one of the kinds itself needs no pydantic to say so
    return f"{at}: expected {' or '.join(kinds)}, got {type(value).__name__}"


def _json_kind(value: Any) -> str | None:
    """The JSON type of a decoded JSON value (``5`` is an integer, ``True`` a boolean)."""
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return kind_of(value) if value is None or isinstance(value, (bool, int, float, str)) else None


def value_problem(values: Any, value: Any, at: str) -> str | None:
    """Why ``value`` is none of a literal's recorded ``values`` (judged as pydantic judges a
    ``Literal``'s: ``1`` is ``True`` there, ``"1"`` is not), or None."""
    if not isinstance(values, list) or not values:
        return None
    plain = len(values) <= MAX_VALUES and all(kind_of(v) in PLAIN_KINDS for v in values)
    if plain and _passes(tuple((kind_of(v), v) for v in values), value):
        return None
    if not plain and any(v == value for v in values):
        return None  # a choice no writer makes (too long, or not plain): compared by equality
    allowed = " or ".join(json.dumps(v) for v in values[:10]) + (" ..." if len(values) > 10 else "")
    return f"{at}: expected {allowed}, got {json.dumps(value, default=str)[:80]}"


def key_problem(element: Any, key: str, at: str) -> str | None:
    """Why a mapping's key (a JSON object's, so a string) breaks the mapping's recorded ``key``
    (``{"kinds": ["integer"]}``, with ``values`` for a ``Literal`` or an ``Enum``), or None.
    A key is judged as pydantic judges a ``dict[int, ...]``'s key: a string it can read as the
    key's kind (``"1"``, ``"1.0"`` and ``" 1"`` are integer keys). A value of a literal names
    the key when it is the key, or reads as it (``"1"`` for an ``IntEnum`` member 1; pydantic
    refuses ``"1"`` for ``Literal[1]``, so there the class refuses what the shape took). A
    ``key`` no writer makes is passed over."""
    if not isinstance(element, Mapping):
        return None
    kinds = element.get("kinds")
    if not isinstance(kinds, list) or not kinds:
        return None
    if not all(isinstance(k, str) and k in PLAIN_KINDS for k in kinds):
        return None
    shown = json.dumps(key)[:80]
    values = element.get("values")
    if isinstance(values, list) and values:
        if len(values) > MAX_VALUES or not all(kind_of(v) in PLAIN_KINDS for v in values):
            return None
        takes = element.get("takes")
        if isinstance(takes, list) and len(takes) <= len(values):
            # the values a JSON object's key can name, as the writer found them with the
            # class's own key check (``Literal[1]`` takes no key ``"1"``): only those
            values = [v for v in takes if kind_of(v) in PLAIN_KINDS]
            if not values:
                return f"{at}: no key can be given: the mapping's keys are no JSON object's keys"
        if any(_reads_as(key, value) for value in values):
            return None
        allowed = " or ".join(json.dumps(v) for v in values[:10])
        return f"{at}: key expected {allowed}{' ...' if len(values) > 10 else ''}, got {shown}"
    if kinds == ["string"]:
        return key_rules_problem(element, key, at)
    if "string" in kinds or _passes(tuple(kinds), key):
        return None
    return f"{at}: key expected {' or '.join(kinds)}, got {shown}"


MAX_PATTERN = 1000
"""The longest key ``pattern`` the server checks: a longer one is no pattern a hand writes (a
forged shape's), and is passed over, as the class, where it is, still checks its keys."""


def key_rules_problem(element: Mapping[str, Any], key: str, at: str) -> str | None:
    """Why a string key breaks its recorded ``minLength``, ``maxLength`` or ``pattern``
    (``dict[constr(pattern=...), int]``), counted and matched as pydantic does: its length in
    code points, its pattern searched anywhere in it by pydantic-core's regex engine, which
    runs in time linear in the key. A rule no writer makes (a length that is no whole number,
    a pattern that engine cannot compile: a look-around, a backreference, one too large) is
    passed over, never a failure of the resume."""
    shown = json.dumps(key)[:80]
    least, most = element.get("minLength"), element.get("maxLength")
    if _length(least) and len(key) < least:
        return f"{at}: key should have at least {_counted(least)} characters, got {shown}"
    if _length(most) and len(key) > most:
        return f"{at}: key should have at most {_counted(most)} characters, got {shown}"
    check = _pattern(element.get("pattern"))
    if check is not None and not check(key):
        pattern = json.dumps(element["pattern"])[:80]
        return f"{at}: key should match pattern {pattern}, got {shown}"
    return None


def _counted(length: int) -> str:
    """A length as a message says it: a forged one of hundreds of digits by its first ones."""
    said = str(length)
    return said if len(said) <= 20 else f"{said[:12]}... ({len(said)} digits)"


def _length(value: object) -> TypeGuard[int]:
    """Whether a recorded length is one a writer makes: a whole number, not negative."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _pattern(pattern: Any) -> Any:
    """A check of ``pattern`` (a callable taking a key), or None for no pattern the server
    checks: not a string, longer than :data:`MAX_PATTERN`, refused by pydantic-core's regex
    engine, or not compiled yet when the check has spent its :data:`PATTERN_SECONDS`. Never
    Python's ``re``: a pattern read from the log is anyone's, and ``(a+)+$`` against a key of
    30 ``a`` and a ``!`` would hold the console's loop for minutes."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN:
        return None
    try:
        found = _COMPILED[pattern]
    except KeyError:
        pass
    else:
        _COMPILED[pattern] = _COMPILED.pop(pattern, found)  # the last used, last evicted
        return found
    left = COMPILE_LEFT.get()
    if left is not None and left[0] <= 0:
        return None
    started = time.perf_counter()
    found = _compiled(pattern)
    if left is not None:
        left[0] -= time.perf_counter() - started
    _COMPILED[pattern] = found
    while len(_COMPILED) > COMPILED_PATTERNS:
        _COMPILED.pop(next(iter(_COMPILED)), None)
    return found


PATTERN_SECONDS = 0.2
"""The most time one check by a recorded shape spends compiling key patterns it has not compiled
before (counted from :func:`~wayline._sdk.hooks.check_shape`); past it, a pattern not compiled
yet is passed over, and checked where the class is. pydantic-core's engine takes 0.2-0.5 s to
find that a forged pattern of a few characters (``\\w{999}``, ``(?i)\\w{500}``) is past its
size limit, so a forged shape of 40 mappings, each a key of its own such pattern, held the
console's loop for six seconds."""

COMPILE_LEFT: ContextVar[list[float] | None] = ContextVar("COMPILE_LEFT", default=None)
"""The seconds of :data:`PATTERN_SECONDS` the current check has left (None: no check's)."""

COMPILED_PATTERNS = 256
"""How many patterns the server keeps compiled (or keeps as ones its engine refuses)."""

_COMPILED: dict[str, Any] = {}


def _compiled(pattern: str) -> Any:
    from pydantic_core import SchemaError, SchemaValidator, ValidationError, core_schema

    try:
        validator = SchemaValidator(core_schema.str_schema(pattern=pattern))
    except SchemaError:
        return None

    def matches(key: str) -> bool:
        try:
            validator.validate_python(key)
        except ValidationError:
            return False
        return True

    return matches


def _reads_as(key: str, value: Any) -> bool:
    """Whether pydantic reads the string ``key`` as the plain ``value`` (its kind's lax rule)."""
    if isinstance(value, str) or value is None:
        return key == value
    import pydantic

    try:
        read = _adapter((kind_of(value),)).validate_python(key)
    except pydantic.ValidationError:
        return False
    return bool(read == value and kind_of(read) == kind_of(value))


_PYTHON: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": None,
}


def _passes(expected: tuple[Any, ...], value: Any) -> bool:
    """Whether pydantic takes ``value`` for ``expected``: JSON types (``("integer",
    "null")``) or a literal's values, each with its kind (``(("integer", 1),)``: a key that
    keeps ``Literal[1]`` and ``Literal[True]`` apart, since ``1 == True``)."""
    import pydantic

    try:
        _adapter(expected).validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


@functools.lru_cache(maxsize=512)
def _adapter(expected: tuple[Any, ...]) -> Any:
    import pydantic

    if all(isinstance(e, tuple) for e in expected):
        hint: Any = Literal[tuple(v for _, v in expected)]
    else:
        hint = Union[tuple(_PYTHON[k] for k in expected)]  # noqa: UP007 (built at run time)
    return pydantic.TypeAdapter(hint)


def plain_problems(recorded: Mapping[str, Any], payload: Mapping[str, Any], at: str) -> list[str]:
    """What a payload's literal fields (``values``) and lists of plain values (``items`` whose
    element has ``kinds``) break: each item is named by its place (``tags[2]``)."""
    problems: list[str] = []
    values = recorded.get("values")
    for name, allowed in values.items() if isinstance(values, Mapping) else ():
        if name in payload:
            found = value_problem(allowed, payload[name], f"{at}{name}")
            problems += [found] if found else []
    items = recorded.get("items")
    for name, element in items.items() if isinstance(items, Mapping) else ():
        given = payload.get(name)
        if not isinstance(element, Mapping) or "kinds" not in element:
            continue
        if not isinstance(given, list):
            continue
        for index, item in enumerate(given):
            where = f"{at}{name}[{index}]"
            found = kind_problem(element.get("kinds"), item, where) or value_problem(
                element.get("values"), item, where
            )
            problems += [found] if found else []
    return problems
