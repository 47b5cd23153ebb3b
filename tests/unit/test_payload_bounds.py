"""The cheap size bound that lets a small payload skip being encoded to be measured: never
below the stored JSON's size, so a payload over a limit is never let through unmeasured."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wayline._core import limits
from wayline._core.limits import Limits, json_bound
from wayline.errors import PayloadTooLargeError

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
    max_leaves=40,
)


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_a_bound_is_never_below_the_stored_size(value: Any) -> None:
    bound = json_bound(value)
    if bound >= 0:
        assert bound >= _size(value)


@pytest.mark.parametrize(
    "value",
    [
        "\U0001f600" * 1000,  # 12 bytes of JSON a character
        ["\U0001f600" * 100, {"k\U0001f600": "\x00" * 50}],
        -(1 << 63),
        -2.2250738585072014e-308,
    ],
)
def test_the_worst_characters_and_numbers_are_bounded(value: Any) -> None:
    assert json_bound(value) >= _size(value)


def test_large_deep_and_odd_values_are_measured_by_encoding() -> None:
    assert json_bound(list(range(1000))) == -1
    assert json_bound(1 << 70) == -1
    assert json_bound({1: "a"}) == -1  # json writes the key as a string


def test_a_string_of_astral_characters_over_the_limit_is_refused() -> None:
    """600 characters past U+FFFF are 7,202 bytes of stored JSON: over a 7,000-byte limit,
    though 6 bytes a character would have bounded them at 3,602."""
    value = "\U0001f600" * 600
    with pytest.raises(PayloadTooLargeError):
        limits.check(value, "result", "the result", Limits(result=7000))
    limits.check(value, "result", "the result", Limits(result=7202))
