"""The shape a typed hook records for a field taken through a path (``AliasPath("a", 0)``: the
first item of the list under ``a``), in a model, a pydantic dataclass and a TypedDict, closed
or not. pydantic's JSON schema names such a field by its name (or by a one-key choice beside
the path), with the field's own type, so the shape required the name, which a payload need not
give, or held the list under the path's first key to the field's type: a console without the
class refused a payload the class takes. Now such a field is not required, its class is
recorded open, and a key a path reads from is recorded without a kind; the class checks it."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest
from typing_extensions import TypedDict

from wayline._sdk.hooks import check_shape, shape

PATH = pydantic.AliasPath("a", 0)
SAME = pydantic.AliasPath("x", 0)
EITHER = pydantic.AliasChoices(pydantic.AliasPath("x", 0), "y")
SHUT = pydantic.ConfigDict(extra="forbid")


class PathModel(pydantic.BaseModel):
    model_config = SHUT
    x: int = pydantic.Field(validation_alias=PATH)


class SameModel(pydantic.BaseModel):
    x: int = pydantic.Field(validation_alias=SAME)


class EitherModel(pydantic.BaseModel):
    x: int = pydantic.Field(validation_alias=EITHER)


@pydantic.dataclasses.dataclass(config=SHUT)
class PathData:
    x: int = pydantic.Field(validation_alias=PATH)


@pydantic.dataclasses.dataclass
class SameData:
    x: int = pydantic.Field(validation_alias=SAME)


class SameDict(TypedDict):
    x: Annotated[int, pydantic.Field(validation_alias=SAME)]


class Holder(pydantic.BaseModel):
    path_model: PathModel | None = None
    same_model: SameModel | None = None
    either_model: EitherModel | None = None
    path_data: PathData | None = None
    same_data: SameData | None = None
    same_dict: SameDict | None = None


CASES: list[tuple[str, dict[str, Any]]] = [
    ("path_model", {"a": [5]}),
    ("same_model", {"x": [5]}),
    ("either_model", {"x": [5]}),
    ("either_model", {"y": 5}),
    ("path_data", {"a": [5]}),
    ("same_data", {"x": [5]}),
    ("same_dict", {"x": [5]}),
]


@pytest.mark.parametrize(("place", "value"), CASES)
def test_a_field_taken_through_a_path_is_not_refused_by_shape(
    place: str, value: dict[str, Any]
) -> None:
    payload = {place: value}
    assert Holder.model_validate(payload).model_dump()[place]["x"] == 5
    check_shape(shape(Holder), payload, "t")


def test_the_path_s_class_is_recorded_open_and_its_other_fields_still_checked() -> None:
    nested = shape(Holder)["nested"]
    assert "closed" not in nested["path_model"] and "closed" not in nested["path_data"]
    for name in ("path_model", "same_model", "path_data", "same_data", "same_dict"):
        assert nested[name]["required"] == [], name
    assert nested["same_model"]["fields"]["x"] == []
