"""A typed hook whose class holds mappings the form did not make rows of, or made rows of that
the class refused (issue #37), in a real browser on every world: ``dict[str, Any]`` (and
``dict[str, JsonValue]``) was one JSON text area and is now key/value rows whose value is any
JSON, checked as it is typed; a key with a pattern and lengths is checked in the browser and
again on the server; a pattern the browser cannot judge as pydantic does is left to the server,
which never blocks a key the class takes; a mapping whose keys no JSON object can hold
(``Literal[1]``, ``Literal[True]``, an ``Enum`` of integers) offers no key and says so, while an
``IntEnum`` key is offered; an integer key past 2^53 is sent as its digits. A forged shape with
a catastrophic pattern leaves a page that does not freeze and a form that sends."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import pydantic
import pytest
from pydantic import ConfigDict, JsonValue, StringConstraints

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_choice_hook_forms import _add
from tests.console.test_deep_hook_forms import (
    _form,
    _refused_in_browser,
    _resumed,
    _texts,
    refused_with_or_without_class,
    typed_hook_workflow,
)
from tests.console.test_hostile_hook_shapes import _forged_form, plain, sent_by
from tests.console.test_list_union_hook_forms import _choose, _refused_by_server


class Bin(enum.Enum):
    TOP = 1
    LOW = 2


class Storey(enum.IntEnum):
    GROUND = 0
    FIRST = 1


Code = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}-\d+$", max_length=8)]


class Jotting(pydantic.BaseModel):
    notes: dict[str, Any]
    extra: dict[str, JsonValue] = {}


class Tally(pydantic.BaseModel):
    codes: dict[Code, int] = {}
    ones: dict[Literal[1], int] = {}
    yes: dict[Literal[True], int] = {}
    bins: dict[Bin, int] = {}
    storeys: dict[Storey, int] = {}
    big: dict[int, str] = {}


class Tagged(pydantic.BaseModel):
    # a look-ahead: pydantic's Rust engine cannot compile it, nor does the browser judge it
    model_config = ConfigDict(regex_engine="python-re")
    tags: dict[Annotated[str, StringConstraints(pattern=r"^(?!tmp)\w+$")], int]


class Folded(pydantic.BaseModel):
    # a pattern given compiled: pydantic checks it with Python's re and its flag, so "AB" is
    # a key the class takes, which neither the browser nor the shape may refuse
    tags: dict[
        Annotated[str, StringConstraints(pattern=re.compile(r"^[a-z]+$", re.I), max_length=4)],
        int,
    ] = {}


jotting = typed_hook_workflow("mapping_rows_hook_forms.jotting", Jotting)
tally = typed_hook_workflow("mapping_rows_hook_forms.tally", Tally)
tagged = typed_hook_workflow("mapping_rows_hook_forms.tagged", Tagged)
folded = typed_hook_workflow("mapping_rows_hook_forms.folded", Folded)


async def _entry(page: Page, form: str, at: str, key: str, value: str, kind: str = "input") -> None:
    """Type ``key`` and ``value`` into a mapping's entry ``at`` (``notes.0``)."""
    await page.type(f'{form} input[name="{at}.key"]', key)
    await page.type(f'{form} {kind}[name="{at}"]', value)


Refusal = tuple[str, Callable[[Console, Page, str, str, str], Awaitable[object]], str]
"""A key the form is sent with, the check that it is refused (``_refused_in_browser`` or
``_refused_by_server``), and what that check expects to be said."""


async def _a_tag_refused_then_taken(
    console: Console, page: Page, workflow: Any, refusal: Refusal, taken: str
) -> None:
    """A run of ``workflow`` answered through its form: an entry of ``tags`` whose key is
    refused as ``refusal`` says, then the key changed to ``taken``, which resumes the run."""
    refused, check, said = refusal
    async with console.engine.worker([workflow]):
        run, form = await _form(console, page, workflow)
        await _add(page, form, "tags")
        await _entry(page, form, "tags.0", refused, "1")
        await check(console, page, form, run.run_id, said)
        await page.type(f'{form} input[name="tags.0.key"]', taken)
        assert await _resumed(page, form, run) == {"tags": {taken: 1}}


async def test_a_mapping_of_any_value_is_answered_through_key_value_rows(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([jotting]):
        run, form = await _form(console, page, jotting)
        await _add(page, form, "notes", 2)
        await _entry(page, form, "notes.0", "plan", '{"steps": [1, null, "x"]}', "textarea")
        await _entry(page, form, "notes.1", "n", "{nope", "textarea")
        await _refused_in_browser(console, page, form, run.run_id, "notes.n: not JSON")
        await page.type(f'{form} textarea[name="notes.1"]', "null")
        await _add(page, form, "extra")
        await _entry(page, form, "extra.0", "", "7", "textarea")
        await _refused_in_browser(console, page, form, run.run_id, "extra[0]: key required")
        await page.type(f'{form} input[name="extra.0.key"]', "seven")
        await page.screenshot("hooks-mapping-rows-form.png")
        assert await _resumed(page, form, run) == {
            "notes": {"plan": {"steps": [1, None, "x"]}, "n": None},
            "extra": {"seven": 7},
        }


async def test_mapping_keys_are_checked_by_pattern_and_offered_only_where_json_can_give_them(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([tally]):
        run, form = await _form(console, page, tally)
        await _add(page, form, "codes")
        await _entry(page, form, "codes.0", "AB-1", "1")
        await _refused_in_browser(
            console, page, form, run.run_id, r'codes[0]: key should match pattern "^[a-z]{2}-\\d+$"'
        )
        await page.type(f'{form} input[name="codes.0.key"]', "ab-123456")
        await _refused_in_browser(
            console, page, form, run.run_id, "codes[0]: key should have at most 8 characters"
        )
        await page.type(f'{form} input[name="codes.0.key"]', "ab-٣٤")  # digits, as \d means

        for keyless in ("ones", "yes", "bins"):
            box = f'{form} fieldset[data-path="{keyless}"]'
            said = await page.text(f"{box} > p.keyless", "no key can be given")
            assert "can only be empty" in said
            add = f"return document.querySelector('{box} > button.add').disabled"
            assert await page.script(add)
        await _add(page, form, "storeys")
        choice = f'{form} select[name="storeys.0.key"]'
        assert await _texts(page, f"{choice} > option") == ["(choose)", "0", "1"]
        await _choose(page, choice, "1")
        await page.type(f'{form} input[name="storeys.0"]', "2")
        await _add(page, form, "big")
        await _entry(page, form, "big.0", "9007199254740993", "past 2^53")
        assert await _resumed(page, form, run) == {
            "codes": {"ab-٣٤": 1},
            "storeys": {"1": 2},
            "big": {"9007199254740993": "past 2^53"},
        }


async def test_a_pattern_the_browser_cannot_judge_is_left_to_the_server(
    console: Console, page: Page
) -> None:
    await _a_tag_refused_then_taken(
        console, page, tagged, ("tmp1", _refused_by_server, "tags.tmp1"), "kept"
    )


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_key_against_its_pattern_or_no_json_key_is_a_typed_422(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {
        "codes": {"xy-12": 3},
        "storeys": {"0": 1},
        "big": {"9007199254740993": "b"},
    }
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                tally,
                [
                    ({"codes": {"AB-1": 1}}, "codes.AB-1"),
                    ({"codes": {"ab-123456": 1}}, "codes.ab-123456"),
                    ({"ones": {"1": 1}}, "ones.1"),
                    ({"yes": {"true": 1}}, "yes.true"),
                    ({"bins": {"1": 1}}, "bins.1"),
                ],
                good,
            )
        ],
    )


HOSTILE_SHAPE = {
    "required": [],
    "fields": {"nested": ["object"], "alternated": ["object"], "long": ["object"]},
    "maps": {
        "nested": {"map": {"any": True}, "key": {"kinds": ["string"], "pattern": "^(a+)+$"}},
        "alternated": {
            "map": {"kinds": ["integer"]},
            "key": {"kinds": ["string"], "pattern": "^(a|aa)*$", "minLength": 10**300},
        },
        "long": {
            "map": {"kinds": ["integer"]},
            "key": {"kinds": ["string"], "pattern": "a*" * 5_000, "maxLength": -1},
        },
    },
}
"""Key rules no writer makes: patterns a backtracking engine takes exponential or polynomial
time on (``(a+)+$`` against 40 ``a`` and a ``!`` is minutes of JavaScript), a pattern of 10,000
characters, a length of 301 digits and a negative one."""


async def test_a_forged_key_pattern_leaves_a_page_that_does_not_freeze_and_a_form_that_sends(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([plain]):
        form = await _forged_form(console, page, "rows-forged", HOSTILE_SHAPE)
        slow = "a" * 40 + "!"
        for place in ("nested", "alternated", "long"):
            await _add(page, form, place)
        await _entry(page, form, "nested.0", slow, "[1]", "textarea")
        await _entry(page, form, "alternated.0", slow, "2")
        await _entry(page, form, "long.0", slow, "3")
        assert await sent_by(page, form) == [
            {"nested": {slow: [1]}, "alternated": {slow: 2}, "long": {slow: 3}}
        ]


PATTERNS = [
    r"^[a-z]{2}-\d+$",
    r"^\d{3}$",
    r"a.b",
    r"^\S+$",
    r"^\s*x",
    r"^[A-Z][a-z]*$",
    r"x+?y",
    r"^[\d-]+$",
    r"^(?:ab|cd)$",
    r"[^a-z]",
    r"^a|b$",
    r"^[^\n]{2,4}$",
]
"""Patterns the browser judges itself (each one of few quantifiers, none on a group)."""

ALPHABET = ["a", "b", "c", "d", "x", "y", "z", "A", "Q", "-", "1", "9", "٣", "\n", "\r", " "]
ALPHABET += ["\u2028", "\u00a0", "é", "😀", "_"]


def _keys(count: int) -> list[str]:
    """``count`` keys of up to eight characters, drawn (seeded) from characters where
    JavaScript's and Rust's regex engines are most likely to differ."""
    import random

    draw = random.Random(37)
    return ["".join(draw.choice(ALPHABET) for _ in range(draw.randrange(9))) for _ in range(count)]


async def _taken_and_judged(
    page: Page, pattern: str, keys: list[str]
) -> tuple[list[bool], list[bool]]:
    """For each of ``keys``, whether pydantic's own check of a key with ``pattern`` takes it,
    and whether the browser's form (``wl.keyRulesProblem``) takes it; the browser must judge
    the pattern itself."""
    check = pydantic.TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
    taken = []
    for key in keys:
        try:
            check.validate_python(key)
        except pydantic.ValidationError:
            taken.append(False)
        else:
            taken.append(True)
    judged = await page.script(
        "const [pattern, keys] = arguments;"
        "if (!wl.keyPattern(pattern)) return null;"
        "return keys.map((key) => wl.keyRulesProblem({ pattern }, key) === null);".replace(
            "arguments", json.dumps([pattern, keys])
        )
    )
    assert judged is not None, pattern
    return taken, judged


async def test_the_browser_judges_a_key_pattern_as_pydantic_does(page: Page) -> None:
    """For each pattern the form judges and each of 400 keys, the browser refuses the key
    exactly when pydantic's own check of a key with that pattern refuses it, so the form
    never blocks a key the class takes."""
    await page.open("/hooks")
    keys = ["a\rb", "a\u2028b", "a\nb", "٣٣٣", "ab-٣", " x", "\u00a0x", "\u2028x", *_keys(400)]
    for pattern in PATTERNS:
        taken, judged = await _taken_and_judged(page, pattern, keys)
        wrong = [repr(k) for k, a, b in zip(keys, taken, judged, strict=True) if a != b]
        assert not wrong, (pattern, wrong[:5])


DIGIT_PATTERNS = [r"^\D$", r"^[^\d]$", r"^\d$", r"^[\d]$", r"^x\D*$"]
"""Patterns of ``\\d`` and ``\\D``, which name the decimal digits of the engine's own Unicode."""


async def test_the_browser_judges_digits_by_pydantic_s_unicode_not_its_own(page: Page) -> None:
    """A browser's ``\\p{Nd}`` is its own Unicode's: Chromium 156's takes digits that
    pydantic-core's tables do not have yet (U+11DE0-11DE9, Unicode 17), so the form refused
    a key of one of them against ``^\\D$`` though the class takes it. Each character that
    either counts a decimal digit, and each just past such a run, is judged as pydantic does."""
    await page.open("/hooks")
    browser_digits = await page.script(
        "const out = [];"
        "for (let c = 0; c < 0x110000; c += 1) {"
        "  if ((c < 0xd800 || c > 0xdfff) && /\\p{Nd}/u.test(String.fromCodePoint(c))) out.push(c);"
        "}"
        "return out;"
    )
    rust = pydantic.TypeAdapter(Annotated[str, StringConstraints(pattern=r"^\d$")])
    pydantic_digits = []
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        try:
            rust.validate_python(chr(c))
        except pydantic.ValidationError:
            continue
        pydantic_digits.append(c)
    points = sorted({*browser_digits, *pydantic_digits, *(c + 1 for c in browser_digits)})
    chars = [chr(c) for c in points if not 0xD800 <= c <= 0xDFFF]
    keys = [*chars, *("x" + c for c in chars[::7])]
    for pattern in DIGIT_PATTERNS:
        taken, judged = await _taken_and_judged(page, pattern, keys)
        blocked = [
            f"U+{ord(k[-1]):04X}"
            for k, a, b in zip(keys, taken, judged, strict=True)
            if a and not b
        ]
        assert not blocked, (pattern, "blocks keys the class takes", blocked[:6])
        wrong = [
            f"U+{ord(k[-1]):04X}" for k, a, b in zip(keys, taken, judged, strict=True) if a != b
        ]
        assert not wrong, (pattern, wrong[:6])


async def test_a_key_pattern_given_compiled_is_left_to_the_class(
    console: Console, page: Page
) -> None:
    """``re.compile(r"^[a-z]+$", re.I)`` takes ``AB`` where the class is; its pattern was
    recorded without its flag, and the form refused ``AB`` (``tags[0]: key should match pattern
    "^[a-z]+$"``), as the server did without the class."""
    said = "tags[0]: key should have at most 4 characters"
    await _a_tag_refused_then_taken(
        console, page, folded, ("ABCDE", _refused_in_browser, said), "AB"
    )


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_key_pattern_given_compiled_is_taken_with_or_without_the_class(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [(folded, [({"tags": {"abcde": 1}}, "tags.abcde")], {"tags": {"AB": 1, "cd": 2}})],
    )
