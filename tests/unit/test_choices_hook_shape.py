"""The shape a typed hook records for a value that may be several kinds of thing that
``options`` and ``maps`` do not say (issue #37): a model beside two kinds of list (a list's item
``Model | list[int] | list[str]``), a mapping beside two models (``dict[str, int] | A | B``, as
a field and as an item) and a mapping beside a list (``list[dict[str, int] | list[int]]``), which
the recorder recorded by their kind alone. They are ``choices`` (one element each for the
models, the list or lists, the mapping and the plain values), which the shape checks agreeing
with pydantic; an older reader passes them over."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest

from tests.unit.test_closed_hook_shape import assert_agree
from tests.unit.test_deep_hook_shape import _refused
from wayline._sdk.hooks import check_shape, shape


class Coin(pydantic.BaseModel):
    value: Annotated[int, pydantic.Field(gt=0)]  # the class's rule: the console's server checks it


class Note(pydantic.BaseModel):
    text: str


class Purse(pydantic.BaseModel):
    slots: list[Coin | list[int] | list[str]] = []
    either: dict[str, int] | Coin | Note | None = None
    mixed: list[dict[str, int] | Coin | Note] = []
    table: list[dict[str, int] | list[int]] = []


COIN = {"required": ["value"], "fields": {"value": ["integer"]}}
NOTE = {"required": ["text"], "fields": {"text": ["string"]}}
UNION = {"branches": [{"title": "Coin", "shape": COIN}, {"title": "Note", "shape": NOTE}]}


def test_choices_are_recorded_for_a_field_and_for_an_item() -> None:
    recorded = shape(Purse)
    assert recorded["items"]["slots"] == {
        "choices": [
            {"shape": {**COIN, "title": "Coin"}},
            {"lists": [{"kinds": ["integer"]}, {"kinds": ["string"]}]},
        ]
    }
    assert recorded["choices"]["either"] == {
        "choices": [
            {"union": UNION},
            {"map": {"kinds": ["integer"]}},
            {"kinds": ["null"], "values": [None]},
        ]
    }
    assert recorded["items"]["mixed"] == {
        "choices": [{"union": UNION}, {"map": {"kinds": ["integer"]}}]
    }
    assert recorded["items"]["table"] == {
        "choices": [{"list": {"kinds": ["integer"]}}, {"map": {"kinds": ["integer"]}}]
    }


SAMPLES: list[Any] = [
    None,
    5,
    "x",
    [],
    [1, 2],
    ["a", "b"],
    [1, "a"],
    {},
    {"value": 1},
    {"value": "x"},
    {"text": "t"},
    {"a": 1},
    {"a": "x"},
    {"value": 1, "a": "x"},
]


@pytest.mark.parametrize("place", ["slots", "either", "mixed", "table"])
def test_the_shape_agrees_with_the_class_on_a_sample_of_values(place: str) -> None:
    recorded = shape(Purse)
    for value in SAMPLES:
        assert_agree(Purse, recorded, {place: value if place == "either" else [value]})


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ({"slots": [[1, "a"]]}, "slots[0][1]: expected integer, got str"),
        ({"slots": [5]}, "slots[0]: expected object or array, got int"),
        ({"either": {"a": "x"}}, "either."),
        ({"either": 5}, "either: expected object or null, got int"),
        ({"mixed": [{"a": "x"}]}, "mixed[0]."),
        ({"table": [{"a": "x"}]}, "table[0].a: expected integer, got str"),
        ({"table": [["x"]]}, "table[0][0]: expected integer, got str"),
    ],
)
def test_a_wrong_value_is_refused_by_its_place(payload: dict[str, Any], said: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        Purse.model_validate(payload)
    assert said in _refused(shape(Purse), payload)


def test_an_older_reader_passes_the_choices_over() -> None:
    recorded = shape(Purse)
    older = {k: v for k, v in recorded.items() if k not in ("choices", "items")}
    older["items"] = {name: {"old": element} for name, element in recorded["items"].items()}
    check_shape(older, {"slots": [5], "either": {"a": "x"}, "mixed": [3], "table": [1]}, "t")


def test_forged_choices_are_passed_over_never_a_crash() -> None:
    for forged in ([5, "x"], [{"kinds": "x"}], [{"map": 5}], [{"list": {}}] * 9, "choices"):
        element = {"choices": forged}
        check_shape({"required": [], "fields": {}, "items": {"m": element}}, {"m": [1, {}]}, "t")
        check_shape({"required": [], "fields": {}, "choices": {"m": element}}, {"m": 1}, "t")
