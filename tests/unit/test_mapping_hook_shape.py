"""The shape a typed hook records for a mapping (issue #37): ``dict[str, int]`` and ``dict[str,
Model]`` as a field (the shape's ``maps``: ``{"map": <what each value is>}``), and a list's item
that is a model or a mapping (``list[Model | dict[str, int]]``: ``{"map": ..., "or": {"shape":
...}}``), which the recorder recorded nothing for. Each value is checked by its key, agreeing
with pydantic; an older reader passes both keys over; a payload of many keys and forged mapping
shapes are bounded."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tests.unit.test_closed_hook_shape import assert_agree
from tests.unit.test_deep_hook_shape import _refused
from tests.unit.test_either_hook_shape import count_looks
from wayline._sdk.hooks import CHECK_VALUES, check_shape, shape


class Crate(pydantic.BaseModel):
    sku: str


class Stock(pydantic.BaseModel):
    counts: dict[str, int]
    crates: dict[str, Crate] = {}
    rows: list[Crate | dict[str, int]] = []
    maybe: dict[str, bool] | None = None


CRATE = {"required": ["sku"], "fields": {"sku": ["string"]}}


def test_mappings_are_recorded_as_a_field_and_as_an_item() -> None:
    recorded = shape(Stock)
    assert recorded["maps"]["counts"] == {"map": {"kinds": ["integer"]}}
    assert recorded["maps"]["crates"] == {"map": {"shape": CRATE}}
    assert recorded["maps"]["maybe"] == {"map": {"kinds": ["boolean"]}}
    assert recorded["items"]["rows"] == {
        "map": {"kinds": ["integer"]},
        "or": {"shape": {**CRATE, "title": "Crate"}},
    }


SAMPLES: list[Any] = ["5", True, 5.0, None, 5, "x", 5.5, [], {}]


@pytest.mark.parametrize("place", ["counts", "crates", "rows", "maybe"])
def test_the_shape_agrees_with_the_class_on_a_sample_of_values(place: str) -> None:
    recorded = shape(Stock)
    for value in SAMPLES:
        for given in ({"a": value}, {"a": value, "b": 1}, {"sku": value}, value):
            payload = {"counts": {}, place: [given] if place == "rows" else given}
            assert_agree(Stock, recorded, payload)


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ({"counts": {"apple": "x"}}, "counts.apple: expected integer, got str"),
        ({"counts": []}, "counts: expected object, got list"),
        ({"counts": {}, "crates": {"k": {}}}, "crates.k.sku: Field required"),
        ({"counts": {}, "crates": {"k": 5}}, "crates.k: expected object, got int"),
        ({"counts": {}, "rows": [{"a": "x"}]}, "rows[0]."),
        ({"counts": {}, "rows": [3]}, "rows[0]: expected object, got int"),
        ({"counts": {}, "maybe": {"a": "x"}}, "maybe.a: expected boolean, got str"),
    ],
)
def test_a_wrong_value_is_refused_by_its_key(payload: dict[str, Any], said: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        Stock.model_validate(payload)
    assert said in _refused(shape(Stock), payload)


def test_an_older_reader_passes_the_mappings_over() -> None:
    recorded = shape(Stock)
    older = {k: v for k, v in recorded.items() if k != "maps"}
    older["items"] = {"rows": {"old": recorded["items"]["rows"]}}
    check_shape(older, {"counts": {"a": "x"}, "rows": [{"a": "x"}]}, "t")


def test_many_keys_and_forged_mappings_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapping of 300,000 keys is looked at up to the check's budget, one look a key; a
    forged ``map`` that is no mapping is passed over; a forged mapping nested far deeper than
    a writer records stops at the depth cap."""
    looked = count_looks(monkeypatch)
    check_shape(shape(Stock), {"counts": {f"k{i}": "x" for i in range(300_000)}}, "t")
    assert len(looked) <= CHECK_VALUES
    for forged in ({"map": 5}, {"map": {"kinds": "x"}}, {"map": {}, "or": 7}):
        check_shape({"required": [], "fields": {}, "maps": {"m": forged}}, {"m": {"a": 1}}, "t")
    element: dict[str, Any] = {"kinds": ["integer"]}
    value: Any = "x"
    for _ in range(1_000):
        element, value = {"map": element}, {"k": value}
    check_shape({"required": [], "fields": {}, "maps": {"m": element}}, {"m": value}, "t")
