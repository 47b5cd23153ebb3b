"""Search attributes: typed key-value pairs a run carries so that it can be found among many.

A run gets them at its start (``StartOptions(attributes=...)``, ``@workflow(attributes=...)``)
and from its workflow (``wayline.set_attributes``, recorded as an ``attributes_set`` event).
This module is pure: it checks names and values, gives each value the form the log stores
(JSON, a datetime as ``{"datetime": iso}``), the rows an index keeps for it, and parses and
judges the ``where`` expressions of ``list_runs``. Every world indexes the same rows and
judges a candidate with the same :func:`matches`, so the two worlds answer alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import InvalidAttributesError, InvalidQueryError

NAME_PATTERN = r"[A-Za-z](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
"""A name: a letter first, letters, digits, ``_`` and ``-`` inside, a letter or digit last, at
most 63 characters. It fits both a NATS subject token and a Kubernetes label name, so each
world can index it, and the operator can mirror it, as it is."""
_NAME = re.compile(NAME_PATTERN)

MAX_ATTRIBUTES = 32
"""Attributes a run holds at most: an index row each (a list, a row per item)."""
MAX_STRING = 256
"""Characters in a string value (each item of a list counts alone)."""
MAX_LIST = 32
"""Items in a list value."""
_MAX_INT = 2**53
"""Integers are compared as floats in the index: past 2**53 two of them could compare equal."""

Kind = Literal["str", "num", "bool", "time"]
IndexRow = tuple[Kind, float | None, str | None]
"""One index row of a value: its kind, and its number (num, bool, time) or its text (str)."""

SEARCH_KEY = "search"
"""Where a run's attributes live in its ``run_created`` data and in ``RunInfo.attributes``."""


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidAttributesError(
            f"search attribute name {name!r} is not allowed: use a letter, then letters, "
            "digits, '_' or '-', ending with a letter or digit, at most 63 characters"
        )
    return name


def _string(name: str, value: str) -> str:
    if len(value) > MAX_STRING:
        raise InvalidAttributesError(
            f"search attribute {name!r}: a string holds at most {MAX_STRING} characters, "
            f"this one has {len(value)}"
        )
    return value


def encode_value(name: str, value: Any) -> Any:
    """The stored (JSON) form of one value; raises :class:`InvalidAttributesError`."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise InvalidAttributesError(
                f"search attribute {name!r}: an integer is at most 2**53 in size, not {value}"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidAttributesError(f"search attribute {name!r}: {value} is not a number")
        return value
    if isinstance(value, str):
        return _string(name, value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidAttributesError(
                f"search attribute {name!r}: a datetime needs a timezone "
                "(datetime.now(UTC), not datetime.now())"
            )
        return {"datetime": value.isoformat()}
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        if len(value) > MAX_LIST:
            raise InvalidAttributesError(
                f"search attribute {name!r}: a list holds at most {MAX_LIST} strings, "
                f"this one has {len(value)}"
            )
        return [_string(name, v) for v in value]
    raise InvalidAttributesError(
        f"search attribute {name!r}: {type(value).__name__} is not indexed "
        "(use str, int, float, bool, a timezone-aware datetime or a list of str)"
    )


def encode(values: Mapping[str, Any], *, unset: bool = False) -> dict[str, Any]:
    """The stored form of ``values``, every name and value checked. With ``unset``, None
    removes the attribute (``set_attributes``); at a start there is nothing to remove."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        check_name(name)
        if value is None and unset:
            out[name] = None
        else:
            out[name] = encode_value(name, value)
    return checked_count(out)


def checked_count(values: Mapping[str, Any]) -> dict[str, Any]:
    if sum(v is not None for v in values.values()) > MAX_ATTRIBUTES:
        raise InvalidAttributesError(
            f"a run holds at most {MAX_ATTRIBUTES} search attributes, "
            f"not {sum(v is not None for v in values.values())}"
        )
    return dict(values)


def merged(current: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with ``update`` applied (None removes), as every reader of the log folds
    an ``attributes_set``: the same rule as a JSON merge patch of one level."""
    out = dict(current)
    for name, value in update.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def stored(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A run's stored attributes from its ``RunInfo.attributes`` (empty when it has none,
    or when what is there is not an object: the log is read as untrusted)."""
    found = attributes.get(SEARCH_KEY)
    return dict(found) if isinstance(found, Mapping) else {}


def decode_value(value: Any) -> Any:
    """A stored value as Python gives it back: a datetime again for ``{"datetime": iso}``."""
    if isinstance(value, Mapping) and isinstance(value.get("datetime"), str):
        try:
            return datetime.fromisoformat(value["datetime"])
        except ValueError:
            return value["datetime"]
    return list(value) if isinstance(value, list) else value


def decoded(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in stored(attributes).items()}


def index_rows(value: Any) -> list[IndexRow]:
    """The index rows of one stored value (none for a value no writer of this version
    stores: it can be shown, not searched)."""
    if isinstance(value, bool):
        return [("bool", float(value), None)]
    if isinstance(value, int) and abs(value) > 2**53:
        return []  # not a value a writer of this version stores (float() would overflow)
    if isinstance(value, int | float):
        return [("num", float(value), None)] if math.isfinite(value) else []
    if isinstance(value, str):
        return [("str", None, value)]
    if isinstance(value, list):
        return [("str", None, v) for v in value if isinstance(v, str)]
    when = decode_value(value)
    if isinstance(when, datetime) and when.tzinfo is not None:
        return [("time", when.timestamp(), None)]
    return []


def shown(value: Any) -> str:
    """How ``runs show`` prints a stored value."""
    out = decode_value(value)
    if isinstance(out, bool):
        return "true" if out else "false"
    if isinstance(out, datetime):
        return out.isoformat()
    if isinstance(out, list):
        return ",".join(out)
    return str(out)


# --- where expressions ------------------------------------------------------------------------

Op = Literal["=", "!=", ">", ">=", "<", "<="]
_WHERE = re.compile(rf"\s*({NAME_PATTERN})\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ].*)?")


@dataclass(frozen=True, slots=True)
class Where:
    """One parsed ``key OP value``: the literal's kind decides how it compares."""

    key: str
    op: Op
    kind: Kind
    num: float | None = None
    text: str | None = None
    source: str = ""
    """The expression as it was written, for messages."""

    def __str__(self) -> str:
        shown_value = self.text if self.kind == "str" else self.num
        return self.source or f"{self.key}{self.op}{shown_value}"

    def holds(self, row: IndexRow) -> bool:
        """Whether one index row of the key satisfies the comparison (``!=`` asks ``=``)."""
        kind, num, text = row
        if kind != self.kind:
            return False
        left: Any = text if self.kind == "str" else num
        right: Any = self.text if self.kind == "str" else self.num
        match self.op:
            case "=" | "!=":
                return bool(left == right)
            case ">":
                return bool(left > right)
            case ">=":
                return bool(left >= right)
            case "<":
                return bool(left < right)
            case "<=":
                return bool(left <= right)


def parse_where(expression: str) -> Where:
    """``key=value``, ``key!=value``, ``key>value``, ``>=``, ``<``, ``<=``. The value is a
    string in quotes, ``true``/``false``, a number, an ISO date or datetime (UTC when it
    names no zone), or else a string as written. Raises :class:`InvalidQueryError`."""
    if not isinstance(expression, str):
        raise InvalidQueryError(f"a where expression is a string, not {expression!r}")
    found = _WHERE.fullmatch(expression)
    if found is None:
        raise InvalidQueryError(
            f"where {expression!r} is not 'key OP value' (OP one of = != > >= < <=; "
            f"a key matches {NAME_PATTERN})"
        )
    key, op, literal = found.group(1), found.group(2), found.group(3)
    if not literal:
        raise InvalidQueryError(f"where {expression!r} has no value after {op!r}")
    if literal[0] in "=<>!":  # "a==b", "a=>b": a typo, never a value (quote it to mean it)
        raise InvalidQueryError(
            f"where {expression!r} is not 'key OP value': the value starts with {literal[0]!r} "
            "(OP is one of = != > >= < <=; quote a value that starts so)"
        )
    where = _literal(key, op, literal)  # type: ignore[arg-type]
    if where.kind == "bool" and op not in ("=", "!="):
        raise InvalidQueryError(f"where {expression!r}: a boolean compares with = and != only")
    return replace(where, source=expression.strip())


def _literal(key: str, op: Op, literal: str) -> Where:
    if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "\"'":
        return Where(key, op, "str", text=literal[1:-1])
    if literal in ("true", "false"):
        return Where(key, op, "bool", num=float(literal == "true"))
    if _NUMBER.fullmatch(literal):
        number = float(literal)
        if not math.isfinite(number):
            raise InvalidQueryError(f"where {key}{op}{literal}: {literal} is not a finite number")
        return Where(key, op, "num", num=number)
    if _DATE.fullmatch(literal):
        try:
            when = datetime.fromisoformat(literal)
        except ValueError as err:
            raise InvalidQueryError(f"where {key}{op}{literal}: not a date ({err})") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return Where(key, op, "time", num=when.timestamp())
    return Where(key, op, "str", text=literal)


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` as ``wayline start --attr`` gives it: the value typed as a ``where``
    literal is (a quoted string, ``true``/``false``, a number, an ISO date or datetime, else
    a string), and ``[a,b]`` a list of strings. Raises :class:`InvalidAttributesError`."""
    name, sep, literal = text.partition("=")
    if not sep:
        raise InvalidAttributesError(f"--attr {text!r} is not key=value")
    check_name(name)
    if len(literal) >= 2 and literal[0] == "[" and literal[-1] == "]":
        items = [item.strip() for item in literal[1:-1].split(",")]
        return name, [item for item in items if item]
    try:
        typed = _literal(name, "=", literal) if literal else Where(name, "=", "str", text="")
    except InvalidQueryError as err:
        raise InvalidAttributesError(err.message) from None
    if typed.kind == "str":
        return name, typed.text
    if typed.kind == "bool":
        return name, typed.num == 1.0
    if typed.kind == "time":
        assert typed.num is not None
        when = datetime.fromisoformat(literal)
        return name, when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    number = float(literal)
    return name, int(literal) if re.fullmatch(r"[-+]?\d+", literal) else number


def parse_all(where: Iterable[str | Where] | str | Where | None) -> list[Where]:
    if where is None:
        return []
    if isinstance(where, str | Where):
        where = [where]
    return [w if isinstance(w, Where) else parse_where(w) for w in where]


def matches(where: Iterable[Where], attributes: Mapping[str, Any]) -> bool:
    """Whether a run's stored attributes satisfy every expression: ``=`` and the orders hold
    when some value of the key (an item, for a list) compares so; ``!=`` when the run has the
    key and none of its values equals the literal."""
    for w in where:
        if w.key not in attributes:
            return False
        rows = index_rows(attributes[w.key])
        hit = any(w.holds(row) for row in rows)
        if hit == (w.op == "!="):
            return False
    return True
