"""The plain-JSON fast paths of ``serde`` give exactly what the general path gives."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import hypothesis.strategies as st
import pydantic
import pydantic_core
import pytest
from hypothesis import given

from wayline._core.serde import Signature, _adapter, decode, encode
from wayline.errors import SerializationError

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(), st.floats(allow_nan=True))


@given(st.one_of(scalars, st.lists(scalars)))
def test_plain_values_encode_as_the_general_path_does(value: Any) -> None:
    try:
        general = pydantic_core.to_jsonable_python(value)
        json.dumps(general, allow_nan=False)
    except ValueError:
        with pytest.raises(SerializationError):
            encode(value, what="v")
        return
    out = encode(value, what="v")
    assert out == general and type(out) is type(general)
    if isinstance(value, list):
        assert out is not value  # a copy, like the general path's


@dataclasses.dataclass
class P:
    a: int


async def _typed(p: P, n: int, s: str) -> None: ...


async def _defaults(a: int, b: int = 2) -> None: ...


def test_positional_calls_decode_and_check_as_bind_does() -> None:
    sig = Signature(_typed)
    stored = sig.encode_args((P(1), 2, "x"), {}, what="step")
    assert stored == {"args": [{"a": 1}, 2, "x"]}
    assert sig.decode_args(stored, what="step") == ([P(1), 2, "x"], {})
    with pytest.raises(SerializationError, match="missing"):
        sig.encode_args((P(1),), {}, what="step")
    with pytest.raises(SerializationError, match="does not match"):
        sig.decode_args({"args": [{"a": "no"}, 2, "x"]}, what="step")
    with pytest.raises(SerializationError, match="too many"):
        sig.decode_args({"args": [{"a": 1}, 2, "x", 4]}, what="step")
    both = Signature(_defaults)  # a default: the general path, unchanged
    assert both.decode_args({"args": [1]}, what="step") == ([1], {})
    assert both.decode_args({"args": [1], "kwargs": {"b": 3}}, what="step") == ([1, 3], {})


@given(st.one_of(scalars, st.lists(scalars)), st.sampled_from([str, int, float, bool]))
def test_scalar_hints_decode_as_pydantic_does(value: Any, hint: type) -> None:
    try:
        expected = _adapter(hint).validate_python(value)
    except pydantic.ValidationError:
        with pytest.raises(SerializationError):
            decode(value, hint, what="v")
        return
    out = decode(value, hint, what="v")
    assert type(out) is type(expected)
    assert out == expected or (out != out and expected != expected)  # NaN is NaN
