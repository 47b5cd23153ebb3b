"""A recorded shape written into the log behind the world's back whose mapping keys and JSON
fields are malformed in ways no writer makes (issue #37), on every world: a ``key`` that is no
object, whose kinds are no list, whose literal has 50,000 values, or whose one value is markup,
and a field whose kinds name no JSON type. Each key is still an input (text, a number, or a
choice that shows the markup as text), the field a JSON text area that takes any JSON, the
page builds every other hook's form, and the form still sends."""

from __future__ import annotations

import json
from typing import Any

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_deep_hook_forms import _texts
from tests.console.test_hostile_hook_shapes import MARKUP, _forged_form, _waiting, plain
from tests.console.test_list_union_hook_forms import _choose

_VALUES = {"kinds": ["integer"]}
KEY_FORGED_SHAPE = {
    "required": [],
    "fields": {"a": ["object"], "b": ["object"], "c": ["object"], "d": ["object"], "j": [7]},
    "maps": {
        "a": {"map": _VALUES, "key": 5},
        "b": {"map": _VALUES, "key": {"kinds": "integer"}},
        "c": {"map": _VALUES, "key": {"kinds": ["integer"], "values": list(range(50_000))}},
        "d": {"map": _VALUES, "key": {"kinds": ["string"], "values": [MARKUP]}},
    },
}


async def test_a_forged_key_or_json_field_leaves_a_form_that_sends(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([plain]):
        beside = await _waiting(
            console.engine.client, plain, "keys-beside", "hostile_hook_shapes.plain:keys-beside"
        )
        form = await _forged_form(console, page, "key-forged", KEY_FORGED_SHAPE)
        for name in "abcd":
            await page.click(f'{form} fieldset[data-path="{name}"] > button.add')
        kinds = await page.script(
            f"return [...document.querySelectorAll('{form} [name$=\".0.key\"]')].map((k) => k.type)"
        )
        assert kinds == ["text", "text", "number", "select-one"]
        offered = await _texts(page, f'{form} select[name="d.0.key"] > option')
        assert offered == ["(choose)", json.dumps(MARKUP)]  # the markup as text
        assert await page.script(f"return document.querySelectorAll('{form} img').length") == 0
        area = f'{form} textarea[name="j"]'
        placeholder = await page.script(f"return document.querySelector('{area}').placeholder")
        assert placeholder == "any JSON value"
        for name, key in (("a", "x"), ("b", "y"), ("c", "3")):
            await page.type(f'{form} input[name="{name}.0.key"]', key)
            await page.type(f'{form} input[name="{name}.0"]', "1")
        await _choose(page, f'{form} select[name="d.0.key"]', json.dumps(MARKUP))
        await page.type(f'{form} input[name="d.0"]', "2")
        await page.type(area, "[1]")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "HOOK_NOT_FOUND")  # the server answered: it was sent
        said = await page.script("return document.getElementById('message').textContent")
        assert said == ""
        assert await page.script("return window.hostileHookShapes === undefined")
        beside_form = 'form[data-token="hostile_hook_shapes.plain:keys-beside"]'
        await page.text(f"{beside_form} > button", "Resume")
        assert (await console.engine.client.get_run(beside.run_id)).status == "running"


def _nested_choices(levels: int) -> dict[str, Any]:
    """Choices whose mapping's value is choices again, ``levels`` deep: judging the mapping
    twice a level was 2^32 looks at the form's depth cap, a page that never loaded."""
    element: dict[str, Any] = {"kinds": ["integer"]}
    for _ in range(levels):
        element = {"choices": [{"map": element}, {"kinds": ["null"], "values": [None]}]}
    return element


CHOICES_FORGED_SHAPE = {
    "required": [],
    "fields": {
        "bad": ["object"],
        "wide": ["array"],
        "item": ["array"],
        "deep": ["array"],
        "shallow": ["array"],
    },
    "choices": {
        "bad": {"choices": [{"map": 5}, {"shape": None}]},
        "ok": {"choices": [{"map": _VALUES}, {"kinds": ["null"], "values": [None]}]},
    },
    "items": {
        "wide": {"choices": [{"list": _VALUES}] * 9},
        "item": {"choices": "x"},
        "deep": _nested_choices(40),
        "shallow": _nested_choices(3),
    },
}


async def test_forged_choices_leave_a_form_that_works(console: Console, page: Page) -> None:
    """Each malformed choice is a JSON text area (and choices nested 40 deep, past the form's
    32 levels, once the page has judged them in a bounded time), and well-formed ones beside
    them are a *kind* choice."""
    async with console.engine.worker([plain]):
        form = await _forged_form(console, page, "choices-forged", CHOICES_FORGED_SHAPE)
        await page.text(f"{form} > button", "Resume")  # the form is built
        shown = await page.script(
            f"return [...document.querySelectorAll('{form} textarea')].map((t) => t.name)"
        )
        assert shown == ["bad", "wide", "item", "deep"]
        await page.click(f'{form} fieldset[data-path="shallow"] > button.add')
        offered = await _texts(page, f'{form} select[name="shallow.0"] > option')
        assert offered == ["(none)", "mapping"]
        said = await page.script("return document.getElementById('message').textContent")
        assert said == ""
