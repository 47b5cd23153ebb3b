"""The shape a typed hook records for a mapping's key (issue #37): ``dict[int, str]``, a
``Literal`` or an ``Enum`` key and a ``bool`` key record what the key is (the map's ``key``,
said as a list's plain item is), which the recorder left out, so a console without the class
took any key. A key is judged as pydantic judges it (a JSON key is a string: ``"1"`` is an
integer key); an older reader passes ``key`` over, and a forged one is passed over."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pydantic
import pytest

from tests.unit.test_closed_hook_shape import assert_agree
from tests.unit.test_deep_hook_shape import _refused
from wayline._sdk.hooks import check_shape, shape


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Rank(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Tally(pydantic.BaseModel):
    ids: dict[int, str] = {}
    levels: dict[Literal["low", "high"], int] = {}
    colours: dict[Colour, int] = {}
    ranks: dict[Rank, int] = {}
    flags: dict[bool, int] = {}
    weights: dict[float, int] = {}
    names: dict[str, int] = {}
    rows: list[dict[int, int]] = []


def test_a_mapping_key_that_is_no_string_is_recorded() -> None:
    maps = shape(Tally)["maps"]
    assert maps["ids"] == {"map": {"kinds": ["string"]}, "key": {"kinds": ["integer"]}}
    # ``takes``: every value, as a JSON key names each of them for these classes
    levels = {"kinds": ["string"], "values": ["low", "high"], "takes": ["low", "high"]}
    assert maps["levels"]["key"] == levels
    colours = {"kinds": ["string"], "values": ["red", "blue"], "takes": ["red", "blue"]}
    assert maps["colours"]["key"] == colours
    assert maps["ranks"]["key"] == {"kinds": ["integer"], "values": [1, 2], "takes": [1, 2]}
    assert maps["flags"]["key"] == {"kinds": ["boolean"]}
    assert maps["weights"]["key"] == {"kinds": ["number"]}
    assert "key" not in maps["names"]  # a string key: as before
    assert shape(Tally)["items"]["rows"]["key"] == {"kinds": ["integer"]}


KEYS = ["1", "01", " 1", "1.0", "1e0", "2", "3", "a", "true", "yes", "low", "red", "", "-1"]


@pytest.mark.parametrize("place", ["ids", "levels", "colours", "ranks", "flags", "weights"])
def test_the_shape_agrees_with_the_class_on_a_sample_of_keys(place: str) -> None:
    recorded = shape(Tally)
    for key in KEYS:
        assert_agree(Tally, recorded, {place: {key: 1 if place != "ids" else "v"}})
    for key in KEYS:
        assert_agree(Tally, recorded, {"rows": [{key: 1}]})


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ({"ids": {"one": "v"}}, 'ids.one: key expected integer, got "one"'),
        ({"levels": {"mid": 1}}, 'levels.mid: key expected "low" or "high", got "mid"'),
        ({"colours": {"green": 1}}, 'colours.green: key expected "red" or "blue", got "green"'),
        ({"ranks": {"3": 1}}, 'ranks.3: key expected 1 or 2, got "3"'),
        ({"flags": {"maybe": 1}}, 'flags.maybe: key expected boolean, got "maybe"'),
        ({"rows": [{"x": 1}]}, 'rows[0].x: key expected integer, got "x"'),
    ],
)
def test_a_wrong_key_is_refused_by_its_place(payload: dict[str, Any], said: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        Tally.model_validate(payload)
    assert said in _refused(shape(Tally), payload)


def test_an_older_reader_passes_the_key_over() -> None:
    recorded = shape(Tally)
    older = {**recorded, "maps": {n: {"map": m["map"]} for n, m in recorded["maps"].items()}}
    check_shape(older, {"ids": {"one": "v"}}, "t")


def test_a_forged_key_is_passed_over_never_a_crash() -> None:
    for forged in (5, {"kinds": "integer"}, {"kinds": ["object"]}, {"kinds": []}, {"kinds": [1]}):
        mapped = {"map": {"kinds": ["integer"]}, "key": forged}
        check_shape({"required": [], "fields": {}, "maps": {"m": mapped}}, {"m": {"a": 1}}, "t")
    for values in ([[1]], [{"a": 1}], list(range(300))):
        mapped = {"map": {"kinds": ["integer"]}, "key": {"kinds": ["string"], "values": values}}
        check_shape({"required": [], "fields": {}, "maps": {"m": mapped}}, {"m": {"a": 1}}, "t")
