"""The shapes a typed hook records for the last three kinds of field the console's form took as
JSON (issue #37): a list whose items are an optional list (``list[list[int] | None]``), a list
whose items are a model or a plain value (``list[Model | int]``) and a model or a list
(``Model | list[int]``), each alone and nested in the others. An item that may be several kinds
of thing is recorded as ``{"options": [...]}`` (one element each, as a list's item is said
elsewhere), a key older readers pass over; each is checked by the recorded shape alone, by its
place."""

from __future__ import annotations

from typing import Any, Literal

import pydantic
import pytest

from tests.unit.test_deep_hook_shape import _refused
from wayline._sdk.hooks import CHECK_VALUES, check_shape, shape


class Coin(pydantic.BaseModel):
    code: str


class Note(pydantic.BaseModel):
    value: int


class Purse(pydantic.BaseModel):
    rows: list[list[int] | None]
    mixed: list[Coin | int]
    either: Coin | list[int]
    maybe: list[Coin | Note | None] = []
    deep: list[list[Coin | int] | None] = []
    level: list[Coin | Literal["low", "high"]] = []
    wide: Coin | list[list[int] | None] | None = None


NULL = {"kinds": ["null"], "values": [None]}
COIN = {"required": ["code"], "fields": {"code": ["string"]}}


def test_each_of_the_three_shapes_and_their_nesting_is_recorded_as_options() -> None:
    recorded = shape(Purse)
    items = recorded["items"]
    assert items["rows"] == {"options": [{"list": {"kinds": ["integer"]}}, NULL]}
    assert items["mixed"] == {
        "options": [{"shape": {**COIN, "title": "Coin"}}, {"kinds": ["integer"]}]
    }
    # a model or a list: the model's shape (named, for the form's choice) and the list's item
    assert recorded["fields"]["either"] == ["object", "array"]
    assert recorded["nested"]["either"] == {**COIN, "title": "Coin"}
    assert items["either"] == {"kinds": ["integer"]}
    union = items["maybe"]["options"][0]["union"]
    assert [b["title"] for b in union["branches"]] == ["Coin", "Note"]
    assert items["maybe"]["options"][1] == NULL
    inner = {"options": [{"shape": {**COIN, "title": "Coin"}}, {"kinds": ["integer"]}]}
    assert items["deep"] == {"options": [{"list": inner}, NULL]}
    assert items["level"]["options"][1] == {"kinds": ["string"], "values": ["low", "high"]}
    assert recorded["nested"]["wide"]["title"] == "Coin"
    assert items["wide"] == {"options": [{"list": {"kinds": ["integer"]}}, NULL]}


GOOD: dict[str, Any] = {
    "rows": [[1, 2], None, []],
    "mixed": [{"code": "A"}, 3],
    "either": [4, 5],
    "maybe": [{"code": "B"}, {"value": 1}, None],
    "deep": [[{"code": "C"}, 6], None],
    "level": ["low", {"code": "D"}],
    "wide": [[1], None],
}


def test_what_the_class_takes_the_recorded_shape_takes() -> None:
    recorded = shape(Purse)
    check_shape(recorded, GOOD, "t")
    check_shape(recorded, {**GOOD, "either": {"code": "E"}, "wide": {"code": "F"}}, "t")
    Purse.model_validate(GOOD)  # and the class agrees


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"rows": [[1], "x"]}, "rows[1]: expected array or null, got str"),
        ({"rows": [[1, "x"]]}, "rows[0][1]: expected integer, got str"),
        ({"mixed": ["x"]}, "mixed[0]: expected object or integer, got str"),
        ({"mixed": [1, {}]}, "mixed[1].code: Field required"),
        ({"mixed": [None]}, "mixed[0]: expected object or integer, got NoneType"),
        ({"either": ["x"]}, "either[0]: expected integer, got str"),
        ({"either": {"value": 1}}, "either.code: Field required"),
        ({"maybe": [{"value": "x"}]}, "maybe[0]."),
        ({"maybe": [7]}, "maybe[0]: expected object or null, got int"),
        ({"deep": [[{"code": 1}]]}, "deep[0][0].code: expected string, got int"),
        ({"deep": [["x"]]}, "deep[0][0]: expected object or integer, got str"),
        ({"level": ["medium"]}, 'level[0]: expected "low" or "high", got "medium"'),
        ({"wide": [["x"]]}, "wide[0][0]: expected integer, got str"),
    ],
)
def test_a_wrong_value_of_each_shape_is_refused_by_its_place(
    change: dict[str, Any], said: str
) -> None:
    payload = {**GOOD, **change}
    with pytest.raises(pydantic.ValidationError):
        Purse.model_validate(payload)  # the class refuses it too: the shape is no stricter
    assert said in _refused(shape(Purse), payload)


def test_an_older_reader_passes_the_options_over() -> None:
    """A reader that knows no ``options`` (a shape checked as before 15) sees an item it cannot
    judge and passes it over, rather than refusing the null item of an optional list."""
    recorded = shape(Purse)
    older = {**recorded, "items": {k: {"old": v} for k, v in recorded["items"].items()}}
    check_shape(older, {**GOOD, "rows": [None, "x"]}, "t")


def test_a_forged_option_is_passed_over_never_a_crash() -> None:
    forged = {
        "required": [],
        "fields": {"xs": ["array"]},
        "items": {"xs": {"options": [None, 5, {"nothing": 1}]}},
    }
    check_shape(forged, {"xs": [1, "a", None]}, "t")


def count_looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for each value a check by a recorded shape judges, failing the
    test as soon as it passes :data:`CHECK_VALUES`."""
    import wayline._sdk.hooks as hooks

    looked: list[int] = []
    kind_problem = hooks.kind_problem

    def counted(kinds: Any, value: Any, at: str) -> str | None:
        looked.append(1)
        assert len(looked) <= CHECK_VALUES, "more values looked at than a check may"
        return kind_problem(kinds, value, at)

    monkeypatch.setattr(hooks, "kind_problem", counted)
    return looked


def test_a_forged_fan_out_of_options_is_passed_over_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each item is checked against each of its options: a log's 20,000 options (480 KB, in
    one event) times a payload's 1,000 items were 20 million checks, minutes of the console's
    loop. A writer makes at most three options; more are forged and passed over, and what a
    writer's options refuse is still refused."""
    count_looks(monkeypatch)
    options = [{"kinds": ["integer"]}] * 20_000 + [{"list": {"kinds": ["integer"]}}]
    forged = {"required": [], "fields": {"xs": ["array"]}, "items": {"xs": {"options": options}}}
    check_shape(forged, {"xs": [[1]] * 1_000}, "t")
    assert "mixed[0]: expected object or integer, got str" in _refused(
        shape(Purse), {**GOOD, "mixed": ["x"]}
    )


class Link(pydantic.BaseModel):
    value: int
    next: Link | None = None


# a model whose shape nearly fills the budget (2,300 fields, about 64 KB of walk)
Big = pydantic.create_model("Big", **{f"field_{i:05d}": (int, 0) for i in range(2_300)})  # type: ignore[call-overload]


class BigOrMapping(pydantic.BaseModel):
    rows: list[Big | dict[str, dict[str, int] | dict[str, str]]] = []  # type: ignore[valid-type]
    chain: Link


class ChainAlone(pydantic.BaseModel):
    chain: Link


def _links(recorded: dict[str, Any]) -> int:
    """How many levels of ``Link`` the shape follows from its ``chain`` field."""
    inner, levels = recorded["nested"].get("chain"), 0
    while inner is not None:
        inner, levels = (inner.get("nested") or {}).get("next"), levels + 1
    return levels


def test_a_model_beside_a_mapping_in_a_list_costs_the_walk_nothing() -> None:
    """``list[Big | dict[str, dict[str, int] | dict[str, str]]]`` records no element (a
    mapping whose values are one of two mappings is checked where the class is; ``dict[str,
    int]`` and ``dict[str, Any]`` are recorded since issue #37's mappings), so its model is not
    walked: at baaa862 every walk walked ``Big`` in full and threw it
    away, which took the budget the rest of the class needed (and 160-220 ms of the worker's
    loop instead of about 1 ms, bench/RESULTS.md)."""
    recorded = shape(BigOrMapping)
    assert "rows" not in recorded.get("items", {})
    assert _links(recorded) == _links(shape(ChainAlone)) == 16
