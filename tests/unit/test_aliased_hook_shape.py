"""The shape a typed hook records for a model that takes keys its JSON schema does not name: a
field by its name as well as its alias (``populate_by_name``, with an ``alias_generator`` too),
by one of several aliases (``AliasChoices``), or left out of the schema (``SkipJsonSchema``);
or whose schema is closed by hand (``json_schema_extra``) though the class takes unknown keys.
A console without the class takes such a payload, as the class does, even when the model
refuses unknown keys (``extra="forbid"``), at the top and in a nested model or a mapping's
model; a model whose keys the schema names all is still closed."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from pydantic.json_schema import SkipJsonSchema

from wayline._sdk.hooks import check_shape, shape


class AliasedShut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)
    user_name: str = pydantic.Field(alias="userName")
    plain: int = 0


class GeneratedShut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=str.upper
    )
    count: int


class ChoiceShut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    amount: int = pydantic.Field(validation_alias=pydantic.AliasChoices("amount", "amt"))


class HiddenShut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    sku: str
    note: SkipJsonSchema[str] = ""


class ShutByHand(pydantic.BaseModel):
    # closed in its JSON schema for the schema's readers, but the class drops an unknown key
    model_config = pydantic.ConfigDict(json_schema_extra={"additionalProperties": False})
    sku: str


class AliasOnlyShut(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    user_name: str = pydantic.Field(alias="userName")


class HoldsAliased(pydantic.BaseModel):
    inner: AliasedShut
    by_key: dict[str, AliasedShut]


@pytest.mark.parametrize(
    ("cls", "payload"),
    [
        (AliasedShut, {"userName": "ann"}),
        (AliasedShut, {"user_name": "ann"}),
        (AliasedShut, {"user_name": "ann", "plain": 2}),
        (GeneratedShut, {"count": 1}),
        (GeneratedShut, {"COUNT": 1}),
        (ChoiceShut, {"amt": 3}),
        (ChoiceShut, {"amount": 3}),
        (HiddenShut, {"sku": "a", "note": "by hand"}),
        (ShutByHand, {"sku": "a", "unknown": 1}),
        (HoldsAliased, {"inner": {"user_name": "a"}, "by_key": {"k": {"user_name": "b"}}}),
    ],
)
def test_a_payload_by_field_name_the_class_takes_is_not_refused_by_shape(
    cls: type[pydantic.BaseModel], payload: dict[str, Any]
) -> None:
    cls.model_validate(payload)  # the class takes it
    check_shape(shape(cls), payload, "tok-aliased")


def test_a_closed_model_without_aliases_still_refuses_an_unknown_key() -> None:
    class PlainShut(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        sku: str

    with pytest.raises(Exception, match="extra: Extra inputs are not permitted"):
        check_shape(shape(PlainShut), {"sku": "a", "extra": 1}, "tok-aliased-plain")
    with pytest.raises(Exception, match="sku: Field required"):
        check_shape(shape(PlainShut), {}, "tok-aliased-plain")


def test_a_closed_model_taken_by_its_alias_only_still_refuses_its_name() -> None:
    with pytest.raises(Exception, match="user_name: Extra inputs are not permitted"):
        check_shape(shape(AliasOnlyShut), {"user_name": "a"}, "tok-aliased-only")
    with pytest.raises(pydantic.ValidationError):
        AliasOnlyShut.model_validate({"user_name": "a"})
