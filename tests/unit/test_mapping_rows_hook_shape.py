"""The recorded shape of a hook's mappings whose values may be any JSON value, whose string keys
have a pattern or lengths, and whose keys are values no JSON object's key can name (issue #37).
``dict[str, Any]`` (and ``Mapping[str, Any]``, ``dict[str, object]``, ``dict[str, JsonValue]``)
was recorded as an object alone, so its form was one JSON text area; it is now a mapping whose
value is ``{"any": true}``, which the form makes key/value rows of. A key's ``pattern``,
``minLength`` and ``maxLength`` were not recorded (a ``pattern`` key's mapping was no mapping at
all): they are now, and the server checks them by the shape with a regex engine that runs in
linear time. ``Literal[1]``, ``Literal[True]`` and an ``Enum`` of integers as keys were offered
by value though the class takes no JSON key for them: ``takes`` now says which values a JSON
key can name, found by the class's own check, and the server refuses the others. A payload the
class takes is never refused by the shape (a Hypothesis property)."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, JsonValue, StringConstraints, constr

from wayline._sdk.hooks import check_shape, shape
from wayline.errors import InvalidPayloadError


class Shelf(enum.Enum):
    TOP = 1
    LOW = 2


class Floor(enum.IntEnum):
    GROUND = 0
    FIRST = 1


Code = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}-\d+$", min_length=4, max_length=8)]


class Notes(pydantic.BaseModel):
    anything: dict[str, Any]
    objects: Mapping[str, object] = {}
    json_values: dict[str, JsonValue] = {}
    maybe: dict[str, Any] | None = None
    nullable: dict[str, Any | None] = {}
    rows: list[dict[str, Any]] = []
    codes: dict[Code, int] = {}
    short: dict[constr(max_length=3), int] = {}
    ones: dict[Literal[1], int] = {}
    yes: dict[Literal[True], int] = {}
    shelves: dict[Shelf, int] = {}
    floors: dict[Floor, int] = {}
    mixed: dict[Literal["a", 1], int] = {}
    ids: dict[int, str] = {}


class Lowered(pydantic.BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    codes: dict[Code, int]
    lower: dict[Annotated[str, StringConstraints(pattern=r"^[a-z]+$", to_lower=True)], int] = {}


class PythonPatterns(pydantic.BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    tags: dict[Annotated[str, StringConstraints(pattern=r"^(?!tmp)\w+$", min_length=2)], int]


def test_a_mapping_of_any_value_is_recorded_as_a_mapping() -> None:
    maps = shape(Notes)["maps"]
    for name in ("anything", "objects", "json_values", "maybe", "nullable"):
        assert maps[name] == {"map": {"any": True}}, name
    assert shape(Notes)["items"]["rows"] == {"map": {"any": True}}
    recorded = shape(Notes)
    check_shape(recorded, {"anything": {"a": None, "b": [1, {"c": "d"}], "": 1.5}}, "t")
    with pytest.raises(InvalidPayloadError, match="anything: expected object, got list"):
        check_shape(recorded, {"anything": [1]}, "t")
    with pytest.raises(InvalidPayloadError, match=r"rows\[0\]: expected object, got int"):
        check_shape(recorded, {"anything": {}, "rows": [5]}, "t")


def test_a_key_pattern_and_lengths_are_recorded_and_checked() -> None:
    recorded = shape(Notes)
    assert recorded["maps"]["codes"]["key"] == {
        "kinds": ["string"],
        "pattern": r"^[a-z]{2}-\d+$",
        "minLength": 4,
        "maxLength": 8,
    }
    assert recorded["maps"]["short"]["key"] == {"kinds": ["string"], "maxLength": 3}
    check_shape(recorded, {"anything": {}, "codes": {"ab-1": 1, "xy-٣٤": 2}}, "t")
    for key, said in [
        ("AB-1", r'codes.AB-1: key should match pattern "\^\[a-z\]'),
        ("ab-", "codes.ab-: key should have at least 4 characters"),
        ("ab-123456", "codes.ab-123456: key should have at most 8 characters"),
    ]:
        with pytest.raises(InvalidPayloadError, match=said):
            check_shape(recorded, {"anything": {}, "codes": {key: 1}}, "t")


def test_a_key_the_class_changes_before_its_check_records_no_rules() -> None:
    """A key stripped or lowered before its pattern is checked (`` ab-1 `` is taken) is no key
    the shape can judge as it is given; neither is a pattern of Python's ``re``, whose ``$``
    also matches before a last newline: the class checks those."""
    recorded = shape(Lowered)
    assert "key" not in recorded["maps"]["codes"]
    assert "key" not in recorded["maps"]["lower"]
    check_shape(recorded, {"codes": {" ab-1 ": 1}, "lower": {"ABC": 1}}, "t")
    python = shape(PythonPatterns)["maps"]["tags"]["key"]
    assert python == {"kinds": ["string"], "minLength": 2}


def test_keys_no_json_object_can_give_are_recorded_and_refused() -> None:
    """pydantic takes no ``"1"`` for a ``Literal[1]`` key, no ``"true"`` for ``Literal[True]``
    and no ``"1"`` for a plain ``Enum`` whose value is 1 (an ``IntEnum`` it does take), as the
    class validates a decoded JSON payload."""
    recorded = shape(Notes)
    keys = {name: recorded["maps"][name]["key"] for name in ("ones", "yes", "shelves")}
    assert keys == {
        "ones": {"kinds": ["integer"], "values": [1], "takes": []},
        "yes": {"kinds": ["boolean"], "values": [True], "takes": []},
        "shelves": {"kinds": ["integer"], "values": [1, 2], "takes": []},
    }
    assert recorded["maps"]["floors"]["key"]["takes"] == [0, 1]
    assert recorded["maps"]["mixed"]["key"]["takes"] == ["a"]
    for name, key in [("ones", "1"), ("yes", "true"), ("shelves", "1"), ("mixed", "1")]:
        payload = {"anything": {}, name: {key: 1}}
        with pytest.raises(pydantic.ValidationError):
            Notes.model_validate(payload)
        with pytest.raises(InvalidPayloadError, match=f"{name}.{key}: "):
            check_shape(recorded, payload, "t")
    taken = {"anything": {}, "floors": {"1": 1, "0": 2}, "mixed": {"a": 3}}
    Notes.model_validate(taken)
    check_shape(recorded, taken, "t")


BIG = str(2**64 + 1)


def test_an_integer_key_past_two_to_the_53_is_a_key() -> None:
    recorded = shape(Notes)
    payload = {"anything": {}, "ids": {BIG: "big"}}
    assert Notes.model_validate(payload).ids == {2**64 + 1: "big"}
    check_shape(recorded, payload, "t")


def _forged(key: dict[str, Any]) -> dict[str, Any]:
    mapping = {"map": {"any": True}, "key": key}
    return {"required": [], "fields": {"m": ["object"]}, "maps": {"m": mapping}}


@pytest.mark.parametrize(
    "key",
    [
        {"kinds": ["string"], "pattern": "(a+)+$"},
        {"kinds": ["string"], "pattern": "^(a|aa)*$"},
        {"kinds": ["string"], "pattern": "(?=a)(?<!b)\\1"},
        {"kinds": ["string"], "pattern": "a{1000}{1000}"},
        {"kinds": ["string"], "pattern": "[" * 60_000},
        {"kinds": ["string"], "pattern": 7, "minLength": True, "maxLength": "3"},
        {"kinds": ["string"], "minLength": -5, "maxLength": 1e400},
    ],
    ids=["nested", "alternation", "lookaround", "too-large", "too-long", "no-rules", "lengths"],
)
def test_a_forged_key_rule_is_passed_over_or_refuses_never_fails(key: dict[str, Any]) -> None:
    """A shape is anyone's who can write the world: a catastrophic pattern is matched by a
    linear-time engine (Python's ``re`` would take minutes for this key), and a rule that engine
    cannot compile, or that is no rule, is passed over; a forged rule refuses with the typed
    error, never another exception."""
    payload = {"m": {"a" * 40_000 + "!": 1, "aa": 2}}
    try:
        check_shape(_forged(key), payload, "t")
    except InvalidPayloadError as err:
        assert "key should match pattern" in str(err)
        assert len(str(err)) < 1_000


def test_a_forged_huge_length_refuses_by_the_typed_error() -> None:
    said = r"at least 100000000000\.\.\. \(301 digits\) characters"
    with pytest.raises(InvalidPayloadError, match=said):
        check_shape(_forged({"kinds": ["string"], "minLength": 10**300}), {"m": {"a": 1}}, "t")


KEYS = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"\A\s?[a-z]{2}-\d{1,5}\s?\Z"),
    st.sampled_from(
        ["1", " 1", "01", "1.0", "true", "True", "a", "ab-1", "ab-12345", "AB-1", "xy-٣", BIG]
    ),
)
MAPPINGS = st.dictionaries(KEYS, st.integers(-3, 3), max_size=4)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
SHAPES = {Notes: shape(Notes), Lowered: shape(Lowered)}
NAMES = ["codes", "short", "ones", "yes", "shelves", "floors", "mixed", "ids"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    anything=st.dictionaries(KEYS, JSON, max_size=3),
    rows=st.lists(st.dictionaries(KEYS, JSON, max_size=2), max_size=2),
    mappings=st.fixed_dictionaries({}, optional=dict.fromkeys(NAMES, MAPPINGS)),
)
def test_a_payload_the_class_takes_is_never_refused_by_its_shape(
    anything: dict[str, Any], rows: list[Any], mappings: dict[str, Any]
) -> None:
    payload = json.loads(json.dumps({"anything": anything, "rows": rows, **mappings}))
    for cls, recorded in SHAPES.items():
        try:
            cls.model_validate(payload)
        except pydantic.ValidationError:
            continue
        check_shape(recorded, payload, "t")


class Compiled(pydantic.BaseModel):
    """Patterns given compiled: pydantic checks them with Python's ``re`` and its flags,
    whatever the engine (``ab\\n`` matches ``^[a-z]+$`` there, ``AB`` matches with
    ``re.IGNORECASE``), so the shape cannot judge them as pydantic-core's engine would."""

    folded: dict[Annotated[str, StringConstraints(pattern=re.compile(r"^[a-z]+$", re.I))], int] = {}
    plain: dict[constr(pattern=re.compile(r"^[a-z]+$"), max_length=4), int] = {}


def test_a_pattern_given_compiled_is_left_to_the_class() -> None:
    recorded = shape(Compiled)
    for payload in ({"folded": {"AB": 1}}, {"plain": {"ab\n": 2}}):
        Compiled.model_validate(payload)
        check_shape(recorded, payload, "t")
    assert recorded["maps"]["folded"] == {"map": {"kinds": ["integer"]}}
    assert recorded["maps"]["plain"]["key"] == {"kinds": ["string"], "maxLength": 4}
    with pytest.raises(InvalidPayloadError, match=r"plain\.abcde: key should have at most 4"):
        check_shape(recorded, {"plain": {"abcde": 1}}, "t")


def test_forged_patterns_slow_to_compile_hold_a_check_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pydantic-core's engine takes 0.2-0.5 s to find a pattern such as ``\\w{999}`` past its
    size limit: forty mappings, each a key of its own such pattern, were seconds of the
    console's loop (six at a950c9b). A check spends at most ``PATTERN_SECONDS`` compiling
    patterns it has not compiled before and passes the others over. The time is counted on a
    clock of the test's: each compile takes 0.15 s of it, so a check of forty new patterns
    compiles two (0.15 s spent, 0.05 s left, then past the budget) and passes 38 over, however
    fast or slow the machine is."""
    from wayline._sdk import plain_shapes

    clock = [0.0]
    compiled: list[str] = []
    real = plain_shapes._compiled

    def slow(pattern: str) -> Any:
        compiled.append(pattern)
        clock[0] += 0.15
        return real(pattern)

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return clock[0]

    monkeypatch.setattr(plain_shapes, "_compiled", slow)
    monkeypatch.setattr(plain_shapes, "time", Clock)
    monkeypatch.setattr(plain_shapes, "_COMPILED", {})
    count = 40
    maps = {
        f"m{i}": {
            "map": {"any": True},
            "key": {"kinds": ["string"], "pattern": f"^a{{0,{i + 1}}}$"},
        }
        for i in range(count)
    }
    forged = {"required": [], "fields": {name: ["object"] for name in maps}, "maps": maps}
    check_shape(forged, {name: {"a": 1} for name in maps}, "t")
    assert compiled == ["^a{0,1}$", "^a{0,2}$"]
    check_shape(forged, {name: {"a": 1} for name in maps}, "t")  # a new check, a new budget
    assert compiled[2:] == ["^a{0,3}$", "^a{0,4}$"]
