"""The compiled JSON codec (``wayline[fast]``: orjson encodes, msgspec decodes) against the
standard library's, which defines what the event log's bytes mean: the same JSON value for
every value (NaN and the infinities, integers past 64 bits, keys that are not strings, key
order, text past ASCII), the same error for every value ``json`` refuses, and each codec reads
what the other wrote. Without the extra installed only the standard library's half runs."""

from __future__ import annotations

import collections
import enum
import json
import math
import struct
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wayline._core import jsoncodec

std_dumps, std_loads = jsoncodec.codec("json")
try:
    fast_dumps, fast_loads = jsoncodec.codec("fast")
except ImportError:  # the extra is absent: only the standard library's half is tested
    fast_dumps = fast_loads = None  # type: ignore[assignment]

needs_fast = pytest.mark.skipif(fast_dumps is None, reason="wayline[fast] is not installed")


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, with NaN equal to NaN and an int never equal to a float."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _outcome(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except (TypeError, ValueError, RecursionError) as err:
        return "error", type(err)


keys = st.one_of(st.text(max_size=8), st.integers(-(2**70), 2**70), st.booleans(), st.none())
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),  # every code point, lone surrogates included
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=20,
)


def test_the_standard_half_writes_what_json_dumps_writes() -> None:
    value = {"a": [1, 2.5, None, "é"], "b": {"c": float("nan")}, 1: 2**70}
    assert std_dumps(value) == json.dumps(value, separators=(",", ":")).encode()
    assert jsoncodec.std_dumps_text(value) == json.dumps(value, separators=(",", ":"))


@needs_fast
@settings(max_examples=200, deadline=None)
@given(values)
def test_fast_dumps_gives_the_json_value_json_gives(value: Any) -> None:
    fast, std = _outcome(fast_dumps, value), _outcome(std_dumps, value)
    assert fast[0] == std[0], (fast, std)
    if std[0] == "error":
        assert fast[1] is std[1]
        return
    assert fast[1].isascii()  # ensure_ascii, as json writes it
    assert _same(std_loads(fast[1]), std_loads(std[1]))
    assert _same(fast_loads(std[1]), std_loads(std[1]))  # each reads what the other wrote


@needs_fast
@settings(max_examples=200, deadline=None)
@given(st.one_of(values.map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass")), st.binary()))
def test_fast_loads_reads_what_json_reads_and_refuses_what_it_refuses(raw: bytes) -> None:
    fast, std = _outcome(fast_loads, raw), _outcome(std_loads, raw)
    assert fast[0] == std[0], (raw, fast, std)
    if std[0] == "error":
        assert fast[1] is std[1]
    else:
        assert _same(fast[1], std[1]), (raw, fast, std)


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


EDGES: list[Any] = [
    float("nan"),
    float("inf"),
    [-float("inf"), 1.0],
    2**64,
    -(2**63) - 1,
    2**200,
    {2: "two", True: "t", None: "n", 1.5: "f"},
    {"z": 1, "a": 2, "m": {"y": None, "b": []}},  # insertion order, not sorted
    "é ✓ \U0001f600 \u2028",
    "\ud800",
    1e-7,
    1e16,
    -0.0,
    Colour.RED,
    Name("x"),
    collections.OrderedDict(b=1, a=2),
    (1, "two"),
    [
        [
            [
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        []
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        ]
    ],
]


@needs_fast
@pytest.mark.parametrize("value", EDGES, ids=repr)
def test_fast_dumps_on_the_edges(value: Any) -> None:
    fast, std = fast_dumps(value), std_dumps(value)
    assert _same(std_loads(fast), std_loads(std))
    assert _same(fast_loads(fast), std_loads(std))
    if not any(isinstance(v, float) for v in _leaves(value)):
        assert fast == std  # only a float's spelling may differ


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value, *(x for v in value.values() for x in _leaves(v))]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _leaves(v)]
    return [value]


@needs_fast
@pytest.mark.parametrize(
    "raw",
    [
        b"NaN",
        b"[Infinity,-Infinity]",
        b"1e400",
        b"123456789012345678901234567890",
        b"-9223372036854775809",
        b'"\\ud800"',
        b'"\xed\xa0\x80"',  # a surrogate in UTF-8 bytes: json decodes it (surrogatepass)
        b"\xef\xbb\xbf[1]",  # a byte-order mark
        '[1,"é"]'.encode("utf-16"),
        b'{"a":1,"a":2}',
        b"[1,]",
        b"\xff",
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_fast_loads_on_the_edges(raw: bytes) -> None:
    fast, std = _outcome(fast_loads, raw), _outcome(std_loads, raw)
    assert fast[0] == std[0]
    assert fast[1] is std[1] if std[0] == "error" else _same(fast[1], std[1])


@needs_fast
def test_unencodable_values_raise_what_json_raises() -> None:
    class Odd:
        pass

    circular: list[Any] = []
    circular.append(circular)
    for value in (Odd(), {"a": {1, 2}}, b"bytes", circular, {(1, 2): 3}):
        with pytest.raises(Exception) as std_err:
            std_dumps(value)
        with pytest.raises(Exception) as fast_err:
            fast_dumps(value)
        assert fast_err.type is std_err.type


def test_an_unknown_codec_name_is_refused() -> None:
    with pytest.raises(ValueError, match="WAYLINE_CODEC='yaml'"):
        jsoncodec.codec("yaml")


HOSTILE: list[Any] = [
    float("nan"),
    float("inf"),
    -float("inf"),
    -0.0,
    [0.0, -0.0, None],
    {"a": None, "b": [None, {"c": None, "d": float("nan")}]},
    {"a": [None, [None, [None, -float("inf")]]]},
    {"a": None, "b": [None, {"c": None}], "c": [[None]]},
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    [None, 2**100],
    {1: None, "x": float("inf")},
    {None: None, True: [None], 2.5: None},
    {"a": None, (1, 2): 3},
    [None, {1, 2}],
    [None, b"bytes"],
]


@needs_fast
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_fast_dumps_matches_json_on_hostile_values_without_reading_its_output_back(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte for byte and error for error what ``json`` gives, for values whose ``null`` may
    stand for a NaN or an infinity, and without decoding its own output (a second pass on
    every append that holds a null)."""
    import orjson

    def no_decode(raw: bytes | str) -> Any:
        raise AssertionError(f"the fast dumps read its own output back: {raw!r}")

    monkeypatch.setattr(orjson, "loads", no_decode)
    dumps, _ = jsoncodec.codec("fast")
    fast, std = _outcome(dumps, value), _outcome(std_dumps, value)
    assert fast == std
    if std[0] == "error":
        with pytest.raises(std[1]) as std_err:
            std_dumps(value)
        with pytest.raises(std[1]) as fast_err:
            dumps(value)
        assert str(fast_err.value) == str(std_err.value)


def _float_of_bits(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


# Every float64 bit pattern is equally likely to be drawn as a NaN (any sign, any payload),
# an infinity, a subnormal or an ordinary float; text and keys stay ASCII so the fast
# encoder's own output is what is compared, not its fallback for text past ASCII.
any_float = st.integers(0, 2**64 - 1).map(_float_of_bits)
non_finite = st.sampled_from([0x7FF, 0xFFF]).flatmap(
    lambda top: st.integers(0, 2**52 - 1).map(lambda low: _float_of_bits(top << 52 | low))
)
ascii_text = st.text(st.characters(max_codepoint=127), max_size=8)
hidden_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), any_float, non_finite, ascii_text
)
hidden_values = st.recursive(
    hidden_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(ascii_text, inner, max_size=5),
    ),
    max_leaves=24,
)


@needs_fast
@settings(max_examples=400, deadline=None)
@given(hidden_values)
@example({"\x7f": None, "Infinity": None})  # a key named like a float json spells
def test_fast_dumps_writes_json_bytes_for_floats_of_every_bit_pattern(value: Any) -> None:
    """Whatever the bits of a NaN or an infinity and however deep it sits among nulls, in a
    list, tuple or dict, the fast encoder's bytes are ``json``'s (once a float spelt
    differently, ``1e-05`` as ``0.00001``, is spelt as ``json`` spells it), and a value
    ``json`` refuses raises the same error with the same message."""
    try:
        std = std_dumps(value)
    except (TypeError, ValueError) as err:
        with pytest.raises(type(err)) as fast_err:
            fast_dumps(value)
        assert str(fast_err.value) == str(err)
        return
    fast = fast_dumps(value)
    assert std_dumps(std_loads(fast)) == std, (fast, std)
    if _holds_non_finite(value):
        assert fast == std


def _holds_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity sits anywhere in ``value``: then the fast encoder must hand
    the whole value to ``json``, byte for byte. The test asked the output for ``NaN`` or
    ``Infinity`` before, which a key or a text of that name also gives: with ``{"\\x7f": None,
    "Infinity": None}`` it compared orjson's raw DEL with json's ``\\u007f``, the same JSON."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list | tuple):
        return any(_holds_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_non_finite(v) for v in value.values())
    return False
