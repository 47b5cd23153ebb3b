"""The shape a typed hook records for a model that refuses unknown keys
(``model_config = ConfigDict(extra="forbid")``, issue #37): ``closed``, at every level the
shape follows (the top, a nested model, a list's model, a union's branch). A console without the
class refuses an unknown key as the class does, by its place, in pydantic's words; an older
reader passes ``closed`` over and refuses nothing it took before; a forged ``closed`` or a
payload of many unknown keys costs one look a key and a short message."""

from __future__ import annotations

from typing import Any, Literal

import pydantic
import pytest

from tests.unit.test_deep_hook_shape import _refused
from wayline._sdk.hooks import CHECK_VALUES, check_shape, shape
from wayline.errors import InvalidPayloadError

SHUT = pydantic.ConfigDict(extra="forbid")


class ShutLine(pydantic.BaseModel):
    model_config = SHUT
    sku: str
    qty: int = 1


class OpenLine(pydantic.BaseModel):
    sku: str


class ShutCard(pydantic.BaseModel):
    model_config = SHUT
    kind: Literal["card"]
    last4: str


class ShutCash(pydantic.BaseModel):
    model_config = SHUT
    kind: Literal["cash"]
    amount: float


class ShutOrder(pydantic.BaseModel):
    model_config = SHUT
    count: int
    ok: bool = False
    line: ShutLine
    lines: list[ShutLine] = []
    loose: OpenLine | None = None
    pay: ShutCard | ShutCash = pydantic.Field(default=..., discriminator="kind")


GOOD: dict[str, Any] = {
    "count": 2,
    "line": {"sku": "A"},
    "lines": [{"sku": "B", "qty": 3}],
    "loose": {"sku": "C", "anything": 1},
    "pay": {"kind": "card", "last4": "1234"},
}


def test_a_closed_model_is_recorded_at_every_level_and_an_open_one_is_not() -> None:
    recorded = shape(ShutOrder)
    assert recorded["closed"] is True
    assert recorded["nested"]["line"]["closed"] is True
    assert recorded["items"]["lines"]["shape"]["closed"] is True
    assert "closed" not in recorded["nested"]["loose"]
    branches = recorded["unions"]["pay"]["branches"]
    assert [b["shape"].get("closed") for b in branches] == [True, True]
    assert "closed" not in shape(OpenLine)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"extra": 1}, "extra: Extra inputs are not permitted"),
        ({"line": {"sku": "A", "colour": "red"}}, "line.colour: Extra inputs are not permitted"),
        ({"lines": [{"sku": "B"}, {"sku": "C", "x": None}]}, "lines[1].x: Extra inputs"),
        ({"pay": {"kind": "cash", "amount": 5, "tip": 1}}, "pay.tip: Extra inputs are"),
        ({"count": "x"}, "count: expected integer, got str"),
        ({"count": None}, "count: expected integer, got NoneType"),
    ],
)
def test_an_unknown_key_is_refused_by_its_place_as_the_class_refuses_it(
    change: dict[str, Any], said: str
) -> None:
    payload = {**GOOD, **change}
    with pytest.raises(pydantic.ValidationError):
        ShutOrder.model_validate(payload)
    assert said in _refused(shape(ShutOrder), payload)


SAMPLES: list[Any] = ["5", True, 5.0, None, 5, "x", 5.5, [], {}]


@pytest.mark.parametrize("field", ["count", "ok", "extra", "line.qty", "line.other"])
def test_the_shape_agrees_with_the_class_on_a_sample_of_values(field: str) -> None:
    """``"5"``, ``True``, ``5.0`` and the rest put in one place each: the recorded shape takes
    a payload exactly when the class does (pydantic's lax mode: ``"5"`` is an integer)."""
    recorded = shape(ShutOrder)
    for value in SAMPLES:
        payload = {**GOOD, "line": dict(GOOD["line"])}
        outer, _, inner = field.partition(".")
        if inner:
            payload[outer][inner] = value
        else:
            payload[outer] = value
        assert_agree(ShutOrder, recorded, payload)


def assert_agree(cls: type[pydantic.BaseModel], recorded: dict[str, Any], payload: Any) -> None:
    """The recorded shape takes ``payload`` exactly when the class does."""
    try:
        cls.model_validate(payload)
        taken = True
    except pydantic.ValidationError:
        taken = False
    try:
        check_shape(recorded, payload, "t")
        checked = True
    except InvalidPayloadError:
        checked = False
    assert checked == taken, payload


def test_an_older_reader_passes_closed_over() -> None:
    """A reader that knows no ``closed`` (one before it, or a shape whose key was dropped) checks
    as before: it takes an unknown key, and refuses nothing more."""
    recorded = shape(ShutOrder)
    older = {k: v for k, v in recorded.items() if k != "closed"}
    check_shape(older, {**GOOD, "extra": 1}, "t")


def test_a_forged_closed_is_passed_over_never_a_crash() -> None:
    for forged in (
        {"required": [], "fields": {"a": ["integer"]}, "closed": "yes"},
        {"required": [], "fields": ["a"], "closed": True},
        {"required": [], "closed": True},
    ):
        check_shape(forged, {"a": 1, "b": 2}, "t")


def test_many_unknown_keys_are_refused_in_a_short_message() -> None:
    """A payload of 50,000 unknown keys is refused by the first ten and a count (one set look
    a key), not by a message of megabytes; past :data:`CHECK_VALUES` keys it is passed over,
    as any payload that large is, and checked where the class is."""
    payload = {**GOOD, **{f"k{i}": i for i in range(50_000)}}
    said = _refused(shape(ShutOrder), payload)
    assert "k9: Extra inputs are not permitted" in said
    assert "k10:" not in said
    assert "49990 more keys not permitted" in said
    assert len(said) < 1_000
    check_shape(shape(ShutOrder), {f"k{i}": i for i in range(CHECK_VALUES + 1)}, "t")
