"""The shape a typed hook records (``wayline._sdk.hooks.shape``) and the check a process
without the hook's class makes with it (``check_shape``): nested models are followed, and a
shape read from the log that is not well-formed (forged, or from another version) is checked
as far as it is, never a crash of the resume."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pydantic
import pytest

from wayline._sdk.hooks import check_shape, shape
from wayline.errors import InvalidPayloadError


class City(pydantic.BaseModel):
    name: str
    zip: int | None = None


class Parcel(pydantic.BaseModel):
    by: str
    to: City
    via: Optional[City] = None  # noqa: UP045 - the spelling pydantic users write too
    stops: list[City] = []


class Node(pydantic.BaseModel):
    label: str
    child: Node | None = None


@dataclasses.dataclass
class Crate:
    to: City


def _refused(recorded: dict[str, Any], payload: Any) -> str:
    with pytest.raises(InvalidPayloadError) as err:
        check_shape(recorded, payload, "t")
    return err.value.message


def test_a_nested_model_is_recorded_and_checked_by_its_path() -> None:
    recorded = shape(Parcel)
    assert recorded["fields"]["to"] == ["object"] and recorded["fields"]["via"] == [
        "object",
        "null",
    ]
    assert recorded["nested"]["to"] == {
        "required": ["name"],
        "fields": {"name": ["string"], "zip": ["integer", "null"]},
    }
    check_shape(recorded, {"by": "a", "to": {"name": "Oslo"}}, "t")
    check_shape(recorded, {"by": "a", "to": {"name": "Oslo"}, "via": None}, "t")
    assert "to.name: Field required" in _refused(recorded, {"by": "a", "to": {}})
    why = _refused(recorded, {"by": "a", "to": {"name": 1}, "via": {"name": "x", "zip": "z"}})
    assert "to.name: expected string, got int" in why
    assert "via.zip: expected integer or null, got str" in why
    assert "to: expected object, got list" in _refused(recorded, {"by": "a", "to": []})
    # a list of models is checked as a list here, and item by item where the class is
    check_shape(recorded, {"by": "a", "to": {"name": "x"}, "stops": [{"no": 1}]}, "t")


def test_a_dataclass_and_a_model_that_contains_itself_are_recorded_too() -> None:
    assert shape(Crate)["nested"]["to"]["required"] == ["name"]
    recorded = shape(Node)
    depth, level = 0, recorded
    while "nested" in level:
        level, depth = level["nested"]["child"], depth + 1
    assert 1 <= depth <= 4  # bounded: the model refers to itself
    assert "child.label: Field required" in _refused(recorded, {"label": "a", "child": {}})


def test_a_shape_recorded_by_an_older_version_is_checked_as_before() -> None:
    older = {"required": ["by", "to"], "fields": {"by": ["string"], "to": []}}
    check_shape(older, {"by": "a", "to": {}}, "t")  # nothing known below the top level
    assert "by: Field required" in _refused(older, {"to": {}})


@pytest.mark.parametrize(
    "forged",
    [
        {"fields": {"x": ["weird"]}},
        {"fields": {"x": "string"}},
        {"fields": ["x"]},
        {"required": "x", "fields": {}},
        {"required": [1, None], "fields": {}},
        {"fields": {}, "nested": {"x": 5}},
        {"fields": {}, "nested": ["x"]},
    ],
)
def test_a_shape_that_is_not_well_formed_does_not_break_the_resume(forged: dict[str, Any]) -> None:
    """A ``hook_created`` written into the log behind the world's back carries any shape: an
    unknown JSON type name was a KeyError out of ``resume``."""
    check_shape(forged, {"x": 1}, "t")
    assert "expected an object" in _refused(forged, [1])
