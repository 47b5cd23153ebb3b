"""The shape a typed hook records (``wayline._sdk.hooks.shape``) and the check a process
without the hook's class makes with it (``check_shape``): nested models are followed, and a
shape read from the log that is not well-formed (forged, or from another version) is checked
as far as it is, never a crash of the resume."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any, Literal, Optional

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


class Card(pydantic.BaseModel):
    kind: Literal["card"]
    number: str


class Cash(pydantic.BaseModel):
    kind: Literal["cash"]
    change_for: int


Pay = Annotated[Card | Cash, pydantic.Field(discriminator="kind")]


class Basket(pydantic.BaseModel):
    lines: list[City]
    pay: Pay
    place: City | Crate  # a union without a tag: the branch is the one the payload fits
    spare: Pay | None = None
    mixed: list[Card | Cash] = []


@dataclasses.dataclass
class Crate:
    to: City


SHAPE_BYTES = 64 * 1024  # the most JSON a recorded shape takes (docs/console.md)


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
    # a list of models is checked item by item, each named by its place
    why = _refused(recorded, {"by": "a", "to": {"name": "x"}, "stops": [{"name": "y"}, {"no": 1}]})
    assert why.endswith("refused: stops[1].name: Field required")


def test_lists_and_unions_of_models_are_recorded_with_their_items_and_branches() -> None:
    recorded = shape(Basket)
    city = {"required": ["name"], "fields": {"name": ["string"], "zip": ["integer", "null"]}}
    assert recorded["fields"]["lines"] == ["array"] and recorded["items"]["lines"] == {
        "shape": city
    }
    pay = recorded["unions"]["pay"]
    assert pay["tag"] == "kind"
    assert [(b["title"], b["value"]) for b in pay["branches"]] == [
        ("Card", "card"),
        ("Cash", "cash"),
    ]
    assert pay["branches"][1]["shape"]["fields"] == {"kind": ["string"], "change_for": ["integer"]}
    assert recorded["unions"]["spare"] == pay and recorded["fields"]["spare"] == ["object", "null"]
    place = recorded["unions"]["place"]
    assert "tag" not in place and [b["title"] for b in place["branches"]] == ["City", "Crate"]
    mixed = recorded["items"]["mixed"]["union"]  # no discriminator given: no tag
    assert "tag" not in mixed and [b["title"] for b in mixed["branches"]] == ["Card", "Cash"]


def test_lists_and_unions_of_models_are_checked_by_their_paths() -> None:
    recorded = shape(Basket)
    good = {
        "lines": [{"name": "Oslo"}, {"name": "Bergen", "zip": 5003}],
        "pay": {"kind": "cash", "change_for": 50},
        "place": {"to": {"name": "Oslo"}},
        "mixed": [{"kind": "card", "number": "4111"}],
    }
    check_shape(recorded, good, "t")
    check_shape(recorded, {**good, "place": {"name": "Oslo"}, "spare": None}, "t")
    cases = {
        "lines[1].zip: expected integer or null, got str": {
            "lines": [{"name": "a"}, {"name": "b", "zip": "x"}]
        },
        "lines[0]: expected object, got int": {"lines": [7]},
        "pay.change_for: Field required": {"pay": {"kind": "cash", "number": "1"}},
        'pay.kind: expected "card" or "cash", got "cheque"': {"pay": {"kind": "cheque"}},
        "spare.number: expected string, got int": {"spare": {"kind": "card", "number": 1}},
        "place.name: Field required": {"place": {"street": "x"}},
        "mixed[0].kind: expected": {"mixed": [{"kind": 3}]},
    }
    for expected, change in cases.items():
        assert expected in _refused(recorded, {**good, **change}), expected


def test_a_dataclass_and_a_model_that_contains_itself_are_recorded_too() -> None:
    assert shape(Crate)["nested"]["to"]["required"] == ["name"]
    recorded = shape(Node)
    depth, level = 0, recorded
    while "nested" in level:
        level, depth = level["nested"]["child"], depth + 1
    assert 4 < depth <= 16  # bounded: the model refers to itself (16: hooks._NESTED_DEPTH)
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
        {"fields": {}, "unions": {"x": {"branches": [1, {"shape": 2}]}}},
        {"fields": {}, "unions": {"x": {"tag": "k", "branches": [{"shape": {}}]}}},
        {"fields": {}, "unions": {"x": {"branches": "b"}}},
        {"fields": {}, "items": {"x": {"shape": 3}}},
        {"fields": {}, "items": {"x": {"union": {"branches": None}}}},
        {"fields": {}, "items": ["x"]},
    ],
)
def test_a_shape_that_is_not_well_formed_does_not_break_the_resume(forged: dict[str, Any]) -> None:
    """A ``hook_created`` written into the log behind the world's back carries any shape: an
    unknown JSON type name was a KeyError out of ``resume``."""
    check_shape(forged, {"x": 1}, "t")
    assert "expected an object" in _refused(forged, [1])


@pytest.mark.parametrize(
    ("key", "described", "wrong", "said"),
    [
        ("nested", {"required": ["a"], "fields": {}}, {}, "x.a: Field required"),
        ("unions", {"branches": [{"shape": {"required": ["a"], "fields": {}}}]}, {}, "x.a: "),
        ("items", {"shape": {"required": ["a"], "fields": {}}}, [{}], "x[0].a: Field required"),
        ("maps", {"map": {"kinds": ["integer"]}}, {"k": "s"}, "x.k: expected integer"),
        ("lists", [{"kinds": ["integer"]}], ["s"], "x[0]: expected integer"),
    ],
)
def test_each_part_of_a_shape_checks_only_a_value_of_its_type_under_a_description_of_its_type(
    key: str, described: Any, wrong: Any, said: str
) -> None:
    """Each part a shape describes fields under (``nested``, ``unions``, ``items``, ``maps``,
    ``lists``) checks a value of its JSON type by its path, and passes over a value of another
    type or left out, a forged description of another type, and a part that is no mapping."""
    recorded = {"fields": {}, key: {"x": described}}
    assert said in _refused(recorded, {"x": wrong})
    for other in ("text", 5, None):
        check_shape(recorded, {"x": other}, "t")
    check_shape(recorded, {}, "t")
    check_shape({"fields": {}, key: {"x": "forged"}}, {"x": wrong}, "t")
    check_shape({"fields": {}, key: ["x"]}, {"x": wrong}, "t")


class Number(pydantic.BaseModel):
    op: Literal["number"]
    value: int


class Negate(pydantic.BaseModel):
    op: Literal["negate"]
    arg: Expr


class Plus(pydantic.BaseModel):
    op: Literal["plus"]
    left: Expr
    right: Expr


class Minus(pydantic.BaseModel):
    op: Literal["minus"]
    left: Expr
    right: Expr


class Times(pydantic.BaseModel):
    op: Literal["times"]
    left: Expr
    right: Expr


class Over(pydantic.BaseModel):
    op: Literal["over"]
    left: Expr
    right: Expr


Expr = Annotated[Number | Negate | Plus | Minus | Times | Over, pydantic.Field(discriminator="op")]
for _node in (Negate, Plus, Minus, Times, Over):
    _node.model_rebuild()


class Formula(pydantic.BaseModel):
    expr: Expr
    steps: list[Expr] = []


def test_a_union_that_contains_itself_is_recorded_within_its_budget() -> None:
    """An expression tree (each node model holds the union again) followed four levels deep
    was a 1.4 MB shape, which no NATS message holds: the hook could never be created. It now
    follows fewer levels, and still checks the ones it records."""
    recorded = shape(Formula)
    assert len(json.dumps(recorded)) <= SHAPE_BYTES
    expr = recorded["unions"]["expr"]
    assert [b["value"] for b in expr["branches"]] == [
        "number",
        "negate",
        "plus",
        "minus",
        "times",
        "over",
    ]
    assert recorded["items"]["steps"]["union"] == expr
    plus = {
        "op": "plus",
        "left": {"op": "number", "value": 1},
        "right": {"op": "number", "value": 2},
    }
    deep = {"op": "negate", "arg": {"op": "negate", "arg": {"op": "negate", "arg": plus}}}
    check_shape(recorded, {"expr": deep, "steps": [plus, deep]}, "t")
    assert 'expr.op: expected "number" or' in _refused(recorded, {"expr": {"op": "pow"}})
    why = _refused(recorded, {"expr": {"op": "plus", "left": {"op": "number"}, "right": plus}})
    assert why.endswith("refused: expr.left.value: Field required")
    assert "steps[1].arg: Field required" in _refused(
        recorded, {"expr": plus, "steps": [plus, {"op": "negate"}]}
    )


def test_a_model_too_large_for_the_budget_still_records_its_top_level() -> None:
    many = pydantic.create_model(  # type: ignore[call-overload]
        "Many", **{f"field_{n:05}_{'x' * 40}": (City, ...) for n in range(2000)}
    )
    recorded = shape(many)
    assert len(recorded["fields"]) == 2000 and "nested" not in recorded
    assert "Field required" in _refused(recorded, {})


class Credit(pydantic.BaseModel):
    kind: Literal["card", "credit"]  # either names the branch
    number: str


class Wallet(pydantic.BaseModel):
    pay: Annotated[Credit | Cash, pydantic.Field(discriminator="kind")]


def test_a_tag_that_allows_several_values_accepts_each_of_them() -> None:
    """Only the first of the tag's values was recorded: a payload the class takes
    (``kind: "credit"``) was refused by a process without the class."""
    recorded = shape(Wallet)
    for kind in ("card", "credit"):
        Wallet.model_validate({"pay": {"kind": kind, "number": "4111"}})
        check_shape(recorded, {"pay": {"kind": kind, "number": "4111"}}, "t")
    (credit, _) = recorded["unions"]["pay"]["branches"]
    assert credit["value"] == "card" and credit["values"] == ["card", "credit"]
    why = _refused(recorded, {"pay": {"kind": "cheque"}})
    assert why.endswith('pay.kind: expected "card" or "credit" or "cash", got "cheque"')
    assert "pay.number: Field required" in _refused(recorded, {"pay": {"kind": "credit"}})


class Labels(pydantic.BaseModel):
    counts: list[int]
    ref: int | str
    names: list[str] = []
    level: Literal["low", "high"]
    flags: list[Literal["red", 2, True]] = []
    mixed: list[int | str] = []
    grade: Literal[1, 2, 3] | None = None


def test_plain_lists_unions_and_literals_are_recorded_with_their_items_and_values() -> None:
    recorded = shape(Labels)
    assert recorded["fields"]["ref"] == ["integer", "string"]
    assert recorded["fields"]["level"] == ["string"]
    assert recorded["items"]["counts"] == {"kinds": ["integer"]}
    assert recorded["items"]["names"] == {"kinds": ["string"]}
    assert recorded["items"]["mixed"] == {"kinds": ["integer", "string"]}
    assert recorded["items"]["flags"] == {
        "kinds": ["string", "integer", "boolean"],
        "values": ["red", 2, True],
    }
    assert recorded["values"] == {"level": ["low", "high"], "grade": [1, 2, 3, None]}


def test_plain_lists_and_literals_are_checked_by_the_recorded_shape_alone() -> None:
    recorded = shape(Labels)
    good = {"counts": [1, 2], "ref": "a", "level": "low", "flags": ["red", 2, True]}
    check_shape(recorded, good, "t")
    check_shape(recorded, {**good, "ref": 3, "mixed": [1, "x"], "grade": None}, "t")
    cases = {
        "counts[1]: expected integer, got str": {"counts": [1, "two"]},
        "counts[0]: expected integer, got float": {"counts": [1.5]},
        "names[0]: expected string, got int": {"names": [5]},
        "mixed[2]: expected integer or string, got float": {"mixed": [1, "a", 1.5]},
        'level: expected "low" or "high", got "medium"': {"level": "medium"},
        'flags[1]: expected "red" or 2 or true, got "blue"': {"flags": ["red", "blue"]},
        "grade: expected 1 or 2 or 3 or null, got 4": {"grade": 4},
        "ref: expected integer or string, got list": {"ref": [1]},
    }
    for expected, change in cases.items():
        assert expected in _refused(recorded, {**good, **change}), expected
    # a literal's value is compared as pydantic compares it: 1 is true
    check_shape(recorded, {**good, "flags": [1]}, "t")


@pytest.mark.parametrize(
    "forged",
    [
        {"fields": {}, "values": {"x": "not a list"}},
        {"fields": {}, "values": ["x"]},
        {"fields": {}, "items": {"x": {"kinds": "integer"}}},
        {"fields": {}, "items": {"x": {"kinds": ["no such type"], "values": 3}}},
    ],
)
def test_a_forged_plain_part_of_a_shape_is_passed_over(forged: dict[str, Any]) -> None:
    check_shape(forged, {"x": [1]}, "t")


class Verdicts(pydantic.BaseModel):
    n: int
    f: float
    on: bool = True
    yes: Literal[True] = True
    one: Literal[1] = 1
    name: str = ""
    counts: list[int] = []
    picks: list[Literal[1, 2]] = []
    slots: list[int | None] = []


_VERDICT_BASE: dict[str, Any] = {"n": 1, "f": 1.0}


@pytest.mark.parametrize(
    "change",
    [
        {"n": True},
        {"n": "5"},
        {"n": 5.0},
        {"n": 5.5},
        {"n": "five"},
        {"f": "1.5"},
        {"f": True},
        {"on": 1},
        {"on": "yes"},
        {"on": "perhaps"},
        {"yes": 1},
        {"yes": "true"},
        {"one": True},
        {"one": 1.0},
        {"one": "1"},
        {"name": 5},
        {"counts": [True, "5", 2.0]},
        {"counts": [1, 2.5]},
        {"picks": [True, 2.0]},
        {"picks": ["1"]},
        {"slots": [None, "3"]},
        {"slots": [None, "x"]},
    ],
    ids=repr,
)
def test_the_recorded_shape_refuses_a_plain_value_only_where_the_class_does(
    change: dict[str, Any],
) -> None:
    """A process without the class (a console that does not import it, the CLI) gives the
    same verdict on a plain value as the class gives, which is how the workflow reads the
    payload on arrival: pydantic's lax rules take ``True``, ``"5"`` and ``5.0`` for an
    integer, ``1`` for ``Literal[True]``, and refuse ``"1"`` for ``Literal[1]``."""
    payload = {**_VERDICT_BASE, **change}
    try:
        Verdicts.model_validate(payload)
        by_class = "taken"
    except pydantic.ValidationError:
        by_class = "refused"
    try:
        check_shape(shape(Verdicts), payload, "t")
        by_shape = "taken"
    except InvalidPayloadError:
        by_shape = "refused"
    assert by_shape == by_class
