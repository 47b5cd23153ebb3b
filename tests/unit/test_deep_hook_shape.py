"""The shapes a typed hook records for what the console's form once took as JSON (issue #37): a
model nested deeper than four levels, a list of lists (``items``' ``list``, one per level) and a
model-or-plain union (the model's ``title`` beside its shape); each checked by the recorded
shape alone, by its place. A model that contains itself, twice, is recorded within the budget,
and a forged shape deeper than any writer records is checked as far as the depth cap, never a
crash of the resume."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pydantic
import pytest

from wayline._sdk.hooks import SHAPE_BYTES, check_shape, shape
from wayline.errors import InvalidPayloadError


def _refused(recorded: dict[str, Any], payload: Any) -> str:
    with pytest.raises(InvalidPayloadError) as err:
        check_shape(recorded, payload, "t")
    return err.value.message


class Six(pydantic.BaseModel):
    code: str


class Five(pydantic.BaseModel):
    six: Six


class Four(pydantic.BaseModel):
    five: Five


class Three(pydantic.BaseModel):
    four: Four


class Two(pydantic.BaseModel):
    three: Three


class One(pydantic.BaseModel):
    two: Two


class Deep(pydantic.BaseModel):
    one: One


def test_a_model_nested_six_levels_deep_is_recorded_and_checked_to_its_last_level() -> None:
    recorded = shape(Deep)
    level = recorded
    for name in ("one", "two", "three", "four", "five", "six"):
        level = level["nested"][name]
    assert level == {"required": ["code"], "fields": {"code": ["string"]}}
    chain = {"one": {"two": {"three": {"four": {"five": {"six": {"code": 1}}}}}}}
    assert _refused(recorded, chain).endswith(
        "refused: one.two.three.four.five.six.code: expected string, got int"
    )


class Cell(pydantic.BaseModel):
    x: int


class Grid(pydantic.BaseModel):
    rows: list[list[int]]
    cells: list[list[Cell]]
    cube: list[list[list[str | None]]] = []


def test_lists_of_lists_are_recorded_one_level_each_and_checked_by_place() -> None:
    recorded = shape(Grid)
    assert recorded["items"] == {
        "rows": {"list": {"kinds": ["integer"]}},
        "cells": {"list": {"shape": {"required": ["x"], "fields": {"x": ["integer"]}}}},
        "cube": {"list": {"list": {"kinds": ["string", "null"]}}},
    }
    good = {"rows": [[1, 2], []], "cells": [[{"x": 1}]], "cube": [[["a", None]]]}
    check_shape(recorded, good, "t")
    cases = {
        "rows[0][1]: expected integer, got str": {"rows": [[1, "x"]]},
        "rows[1]: expected array, got int": {"rows": [[1], 2]},
        "cells[0][0].x: Field required": {"cells": [[{}]]},
        "cells[0][0]: expected object, got int": {"cells": [[3]]},
        "cube[0][0][1]: expected string or null, got int": {"cube": [[["a", 4]]]},
    }
    for expected, change in cases.items():
        assert expected in _refused(recorded, {**good, **change}), expected


class Voucher(pydantic.BaseModel):
    code: str


class Stamp(pydantic.BaseModel):
    count: int


class Tip(pydantic.BaseModel):
    amount: Voucher | int
    extra: Voucher | None = None
    via: Voucher | Stamp | str | None = None


def test_a_model_or_plain_union_records_the_models_title_for_the_forms_choice() -> None:
    recorded = shape(Tip)
    assert recorded["fields"] == {
        "amount": ["object", "integer"],
        "extra": ["object", "null"],
        "via": ["object", "string", "null"],
    }
    assert [b["title"] for b in recorded["unions"]["via"]["branches"]] == ["Voucher", "Stamp"]
    assert recorded["nested"]["amount"]["title"] == "Voucher"
    assert "title" not in recorded["nested"]["extra"]  # Optional[Model]: a fieldset, as before
    check_shape(recorded, {"amount": 5}, "t")
    check_shape(recorded, {"amount": {"code": "A"}}, "t")
    assert "amount: expected object or integer, got str" in _refused(recorded, {"amount": "x"})
    assert "amount.code: Field required" in _refused(recorded, {"amount": {}})
    check_shape(recorded, {"amount": 1, "via": "desk"}, "t")
    assert "via: expected object or string or null, got int" in _refused(
        recorded, {"amount": 1, "via": 7}
    )
    # an untagged union's object must fit one branch: the closest one's problems are said
    assert "refused: via." in _refused(recorded, {"amount": 1, "via": {"count": "x"}})


class Tree(pydantic.BaseModel):
    value: int
    left: Tree | None = None
    right: Tree | None = None
    forest: list[list[Tree]] = []


def test_a_model_that_contains_itself_twice_is_recorded_within_its_budget() -> None:
    """A tree followed 16 levels deep would be millions of fields: the recorder takes the most
    levels that fit in the budget, and stops."""
    recorded = shape(Tree)
    assert len(json.dumps(recorded)) <= SHAPE_BYTES
    depth, level = 0, recorded
    while "nested" in level:
        level, depth = level["nested"]["left"], depth + 1
    assert 1 <= depth < 16
    wrong = {"value": 1, "left": {"value": 2, "right": {"value": "x"}}}
    assert "left.right.value: expected integer" in _refused(recorded, wrong)
    assert "forest[0][0].value: Field required" in _refused(
        recorded, {"value": 1, "forest": [[{}]]}
    )


def _chain(key: str, levels: int, last: Any) -> Any:
    """``levels`` of ``{"list": ...}`` (or of nested shapes) around ``last``: deeper than any
    writer records, as only a forged log holds."""
    for _ in range(levels):
        if key == "list":
            last = {"list": last}
        else:
            last = {"required": [], "fields": {"in": ["object"]}, "nested": {"in": last}}
    return last


def test_a_forged_shape_deeper_than_any_writer_records_is_checked_to_the_cap() -> None:
    lists = {"fields": {"deep": ["array"]}, "items": {"deep": _chain("list", 300, {"kinds": []})}}
    payload: Any = 1
    for _ in range(300):
        payload = [payload]
    check_shape(lists, {"deep": payload}, "t")  # nothing below the cap is checked, no crash
    assert "deep[0]: expected array, got int" in _refused(lists, {"deep": [1]})
    nested = _chain("nested", 300, {"required": ["x"], "fields": {"x": ["integer"]}})
    check_shape(nested, {"in": {"in": {}}}, "t")
    odd = {"fields": {"a": ["array"]}, "items": {"a": {"list": "not an element", "kinds": 3}}}
    check_shape(odd, {"a": [[1]]}, "t")  # a part no writer makes is passed over


class Bounded(pydantic.BaseModel):
    tags: Annotated[list[list[Annotated[int, pydantic.Field(ge=0)]]], pydantic.Field(max_length=3)]


def test_a_list_of_lists_whose_items_are_constrained_records_their_kind() -> None:
    """A rule the shape cannot say (``ge=0``) is checked where the class is: the recorded
    item is its JSON type."""
    recorded = shape(Bounded)
    assert recorded["items"]["tags"] == {"list": {"kinds": ["integer"]}}


class RowsOnTheLastLevel(pydantic.BaseModel):
    grid: list[list[int]]


def test_a_list_of_lists_on_the_last_recorded_level_is_checked_as_recorded() -> None:
    """A list of lists whose field is on the recorder's last level (15 models down) is
    recorded with its items: the server checks them there too, as the class would."""
    cls: type[pydantic.BaseModel] = RowsOnTheLastLevel
    for level in range(15):
        cls = pydantic.create_model(f"LastLevel{level}", inner=(cls, ...))
    recorded = shape(cls)
    level_shape = recorded
    for _ in range(15):
        level_shape = level_shape["nested"]["inner"]
    assert level_shape["items"]["grid"] == {"list": {"kinds": ["integer"]}}
    wrong: Any = {"grid": [[1], ["x"]]}
    for _ in range(15):
        wrong = {"inner": wrong}
    with pytest.raises(pydantic.ValidationError):
        cls.model_validate(wrong)
    assert "inner." * 15 + "grid[1][0]: expected integer, got str" in _refused(recorded, wrong)


def _wide_chain(fields: int) -> type[pydantic.BaseModel]:
    """17 models, each holding the next and ``fields`` integers: every level fits the budget
    but the last ones."""
    cls = pydantic.create_model("WideLevel16", **{f"n{j:03d}": (int, 0) for j in range(fields)})
    for level in range(15, -1, -1):
        spec: dict[str, Any] = {f"n{j:03d}": (int, 0) for j in range(fields)}
        cls = pydantic.create_model(f"WideLevel{level}", inner=(cls, ...), **spec)
    return cls


def _levels_of(recorded: dict[str, Any]) -> int:
    levels = 0
    while "nested" in recorded:
        recorded, levels = recorded["nested"]["inner"], levels + 1
    return levels


@pytest.mark.parametrize("fields", [100, 300])
def test_the_recorder_walks_a_deep_wide_class_a_bounded_number_of_times(
    fields: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder runs on the worker's event loop, once per class: it finds the most levels
    that fit in a few walks (twice as many levels deeper each, then halving the gap), each given
    up at the budget, not one walk per level, and records as many levels as one walk per
    level finds (with 300 fields a level, 16 levels do not fit)."""
    import wayline._sdk.hooks as hooks

    schema = hooks._schema(_wide_chain(fields))
    top, defs = hooks._top(schema), schema["$defs"]
    fitting = []
    for levels in range(1, 17):  # one walk per level: what the recorder must find
        try:
            walked = hooks._fields(top, defs, hooks._Walk(levels))
        except hooks._TooLarge:
            break
        if len(json.dumps(walked)) > SHAPE_BYTES:
            break
        fitting.append(levels)
    walks: list[Any] = []

    class Counted(hooks._Walk):
        def __init__(self, levels: int) -> None:
            super().__init__(levels)
            walks.append(self)

    monkeypatch.setattr(hooks, "_Walk", Counted)
    recorded = hooks._bounded(schema)
    assert walks
    assert len(walks) <= 1 + 8, [w.levels for w in walks]
    assert sum(w.spent for w in walks[1:]) <= 6 * SHAPE_BYTES  # 1+2+4+8, 16 given up, 3 halvings
    assert _levels_of(recorded) == max(fitting) == (16 if fields == 100 else max(fitting))
    assert fields == 100 or max(fitting) < 16


class Code(pydantic.BaseModel):
    code: str


class CodeOrMapping(pydantic.BaseModel):
    plain: Code | dict[str, int]
    either: Code | Six | dict[str, Any] | None = None


def test_a_model_or_a_mapping_is_not_checked_as_the_model() -> None:
    """``Model | dict[str, int]`` takes an object that is no model's: the shape records the
    field's kind, not the model's fields, so a console without the class refuses none of the
    objects the class takes (no 422 the class would not give)."""
    recorded = shape(CodeOrMapping)
    for value in ({"a": 1}, {}, {"code": "x"}):
        payload = {"plain": value, "either": {"b": [1]}}
        CodeOrMapping.model_validate(payload)
        check_shape(recorded, payload, "t")
    assert "nested" not in recorded and "unions" not in recorded
    assert "plain: expected object, got int" in _refused(recorded, {"plain": 3})


def _forked(levels: int) -> dict[str, Any]:
    """A forged shape: a union without a tag of two branches, ``levels`` deep, each branch
    the same again, and at the bottom a list of integers."""
    if not levels:
        return {
            "required": [],
            "fields": {"xs": ["array"]},
            "items": {"xs": {"kinds": ["integer"]}},
        }
    inner = _forked(levels - 1)
    branches = [{"title": "L", "shape": inner}, {"title": "R", "shape": inner}]
    return {"required": [], "fields": {"a": ["object"]}, "unions": {"a": {"branches": branches}}}


def test_a_check_by_a_forged_shape_looks_at_a_bounded_number_of_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each level of a union without a tag checks a value against each branch: a forged
    shape of two branches six levels deep and a list of 5,000 integers were 320,000 checks of
    an item. The check stops at 200,000 values and passes over the rest; what it found
    before is still refused."""
    import wayline._sdk.plain_shapes as plain_shapes

    looked: list[int] = []
    kind_problem = plain_shapes.kind_problem

    def counted(kinds: Any, value: Any, at: str) -> str | None:
        looked.append(1)
        return kind_problem(kinds, value, at)

    monkeypatch.setattr(plain_shapes, "kind_problem", counted)
    payload: Any = {"xs": list(range(5000))}
    for _ in range(6):
        payload = {"a": payload}
    check_shape(_forked(6), payload, "t")
    assert len(looked) <= 200_000
    assert "a.xs[0]: expected integer, got str" in _refused(_forked(1), {"a": {"xs": ["x"]}})


@pytest.mark.parametrize(
    "kinds",
    [["integer"], ["number"], ["string"], ["boolean"], ["null"], ["array"], ["object"]],
)
def test_a_plain_kind_is_judged_as_pydantic_judges_it(kinds: list[str]) -> None:
    """A value of the kind itself is taken without asking pydantic; every other value gets
    pydantic's lax verdict, as before (``"5"``, ``5.0`` and ``True`` are integers)."""
    from wayline._sdk.plain_shapes import _passes, kind_problem

    for value in (5, 5.0, 2.5, "5", "x", True, None, [1], {"a": 1}, float("inf")):
        assert (kind_problem(kinds, value, "v") is None) == _passes(tuple(kinds), value), value
