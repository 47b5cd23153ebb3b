"""The shape a typed hook records for a pydantic dataclass and a TypedDict with
``extra="forbid"`` (issue #37): closed, as a model with ``extra="forbid"`` is, so a console
without the class refuses an unknown key, and, as for such a model, opened (with the field not
required) where a field is taken by a key its JSON schema does not name (its name as well as
its alias, or one of several aliases). Before, such a class was recorded closed with its
alias required, and a payload giving the field by its name, which the class takes, was
refused by shape."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

import pydantic
import pytest
from typing_extensions import TypedDict

from tests.unit.test_closed_hook_shape import assert_agree
from wayline._sdk.hooks import check_shape, shape


@pydantic.dataclasses.dataclass(config=pydantic.ConfigDict(extra="forbid"))
class Shut:
    x: int
    y: int = 0


@pydantic.dataclasses.dataclass(config=pydantic.ConfigDict(extra="forbid", populate_by_name=True))
class ByName:
    x: int = pydantic.Field(alias="ex")


@pydantic.dataclasses.dataclass(config=pydantic.ConfigDict(extra="forbid"))
class Choices:
    x: int = pydantic.Field(validation_alias=pydantic.AliasChoices("x", "ex"))


class ShutDict(TypedDict):
    __pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[misc]
    y: int
    z: NotRequired[int]


class NamedDict(TypedDict):
    __pydantic_config__ = pydantic.ConfigDict(extra="forbid", populate_by_name=True)  # type: ignore[misc]
    y: Annotated[int, pydantic.Field(alias="why")]


class Holder(pydantic.BaseModel):
    shut: Shut | None = None
    by_name: ByName | None = None
    choices: Choices | None = None
    shut_dict: ShutDict | None = None
    named_dict: NamedDict | None = None


def test_closed_classes_are_recorded_closed_and_keyed_ones_open() -> None:
    nested = shape(Holder)["nested"]
    assert nested["shut"] == {
        "required": ["x"],
        "fields": {"x": ["integer"], "y": ["integer"]},
        "closed": True,
    }
    assert nested["shut_dict"]["closed"] is True
    for name in ("by_name", "choices", "named_dict"):
        assert "closed" not in nested[name] and nested[name]["required"] == [], name


PAYLOADS: list[Any] = [
    {"x": 1},
    {"ex": 1},
    {"x": 1, "q": 2},
    {"y": 1},
    {"why": 1},
    {"y": 1, "z": 2},
    {"y": 1, "q": 2},
    {},
]


@pytest.mark.parametrize("place", ["shut", "shut_dict"])
def test_the_shape_agrees_with_a_closed_class_on_a_sample_of_payloads(place: str) -> None:
    recorded = shape(Holder)
    for payload in PAYLOADS:
        assert_agree(Holder, recorded, {place: payload})


@pytest.mark.parametrize("place", ["by_name", "choices", "named_dict"])
def test_the_shape_refuses_nothing_a_keyed_class_takes(place: str) -> None:
    recorded = shape(Holder)
    for payload in PAYLOADS:
        try:
            Holder.model_validate({place: payload})
        except pydantic.ValidationError:
            continue
        check_shape(recorded, {place: payload}, "t")
