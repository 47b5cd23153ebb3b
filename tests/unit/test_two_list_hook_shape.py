"""The shape a typed hook records for a union of two kinds of list (``list[int] | list[str]``,
issue #37), as a field (the shape's ``lists``: each kind's item) and as a list's item
(``{"lists": [...]}``, with ``plain`` for a plain value beside them, ``list[list[int] |
list[str] | None]``). A list fits when all its items fit one kind; a wrong one is refused by its
place, agreeing with pydantic; an older reader passes both keys over; a forged fan-out of kinds
is bounded."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tests.unit.test_closed_hook_shape import assert_agree
from tests.unit.test_deep_hook_shape import _refused
from tests.unit.test_either_hook_shape import count_looks
from wayline._sdk.hooks import CHECK_VALUES, check_shape, shape
from wayline.errors import InvalidPayloadError


class TwoLists(pydantic.BaseModel):
    xs: list[int] | list[str]
    rows: list[list[int] | list[str] | None] = []
    maybe: list[int] | list[bool] | None = None


INT, STR = {"kinds": ["integer"]}, {"kinds": ["string"]}


def test_a_union_of_two_lists_is_recorded_as_a_field_and_as_an_item() -> None:
    recorded = shape(TwoLists)
    assert recorded["lists"]["xs"] == [INT, STR]
    assert recorded["lists"]["maybe"] == [INT, {"kinds": ["boolean"]}]
    assert recorded["items"]["rows"] == {
        "lists": [INT, STR],
        "plain": {"kinds": ["null"], "values": [None]},
    }


SAMPLES: list[Any] = ["5", True, 5.0, None, 5, "x", 5.5, [], {}]


@pytest.mark.parametrize("place", ["xs", "rows", "maybe"])
def test_the_shape_agrees_with_the_class_on_a_sample_of_values(place: str) -> None:
    """Each sample as the only item, as two items beside an integer and a string, and as the
    whole value: the recorded shape takes a payload exactly when the class does."""
    recorded = shape(TwoLists)
    for value in SAMPLES:
        for given in ([value], [value, 1], [value, "a"], value):
            if place == "rows":
                given = [given]
            payload = {"xs": [1], place: given}
            assert_agree(TwoLists, recorded, payload)


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ({"xs": [1, "a"]}, "xs[1]: expected integer, got str"),
        ({"xs": ["a", 1.5]}, "xs[1]: expected string, got float"),
        ({"xs": [1], "rows": [[1], [2, "b"]]}, "rows[1][1]: expected integer, got str"),
        ({"xs": [1], "rows": [7]}, "rows[0]: expected null or array, got int"),
        ({"xs": [1], "maybe": [1, "x"]}, "maybe[1]: expected integer, got str"),
    ],
)
def test_a_wrong_value_is_refused_by_its_place(payload: dict[str, Any], said: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        TwoLists.model_validate(payload)
    assert said in _refused(shape(TwoLists), payload)


def test_an_older_reader_passes_the_two_lists_over() -> None:
    """A reader that knows no ``lists`` nor ``plain`` sees no item it can judge: it refuses
    nothing it took before (at eb18ecc nothing was recorded for these fields)."""
    recorded = shape(TwoLists)
    older = {k: v for k, v in recorded.items() if k != "lists"}
    older["items"] = {"rows": {"old": recorded["items"]["rows"]}}
    check_shape(older, {"xs": [1, "a"], "rows": [[1, "a"], 5]}, "t")


def test_forged_fan_outs_of_lists_are_passed_over_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More kinds than a writer records (three) are passed over; a forged tree of kinds three
    wide and twelve deep against a payload nested as deep costs at most :data:`CHECK_VALUES`
    looks (each kind tried spends the items it looks at), never 3**12 tries of each item."""
    looked = count_looks(monkeypatch)
    wide = {"required": [], "fields": {"xs": ["array"]}, "lists": {"xs": [INT] * 1_000}}
    check_shape(wide, {"xs": ["a"] * 1_000}, "t")
    element: dict[str, Any] = {"kinds": ["boolean"]}
    value: Any = "x"
    for _ in range(12):
        element, value = {"lists": [element, element, element]}, [value, value]
    deep = {"required": [], "fields": {"xs": ["array"]}, "items": {"xs": element}}
    try:
        check_shape(deep, {"xs": [value] * 10}, "t")
    except InvalidPayloadError:
        pass
    assert len(looked) <= CHECK_VALUES
