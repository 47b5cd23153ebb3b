"""A typed hook whose class holds a value the shape can say no more of than its JSON type
(issue #37): ``Any``, ``object``, ``JsonValue`` and ``list[Any]``, in a real
browser on every world. Each is a JSON text area that says what it takes (``any JSON value``,
``a JSON object``, ``a JSON list``) and is checked as it is typed: text that is no JSON, or an
object's or a list's field given another JSON type, is marked invalid at once and refused in the
browser by its place, before anything is sent (before, the area said only ``JSON`` and a list
given for ``dict[str, Any]`` went to the server). ``dict[str, Any]`` is key/value rows now, each
value such a text area (tests/console/test_mapping_rows_hook_forms.py). The run ends with
exactly the payload typed."""

from __future__ import annotations

from typing import Any

import pydantic

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_deep_hook_forms import (
    _form,
    _refused_in_browser,
    _resumed,
    typed_hook_workflow,
)


class Note(pydantic.BaseModel):
    anything: Any
    meta: dict[str, Any]
    blob: pydantic.JsonValue = None
    thing: object = None
    rows: list[Any] = []
    maybe: dict[str, Any] | None = None


note = typed_hook_workflow("any_json_hook_forms.note", Note)


async def _valid(page: Page, form: str, name: str) -> bool:
    found: bool = await page.script(
        f"return document.querySelector('{form} textarea[name=\"{name}\"]').checkValidity()"
    )
    return found


async def test_any_json_value_is_a_checked_json_text_area(console: Console, page: Page) -> None:
    async with console.engine.worker([note]):
        run, form = await _form(console, page, note)
        said = await page.script(
            f"return Object.fromEntries([...document.querySelectorAll('{form} textarea')]"
            ".map((t) => [t.name, t.placeholder]))"
        )
        assert said == {
            "anything": "any JSON value",
            "blob": "any JSON value",
            "thing": "any JSON value",
            "rows": "a JSON list",
        }
        await page.type(f'{form} textarea[name="anything"]', '{"a": [1, ')
        assert not await _valid(page, form, "anything")  # marked as it is typed
        await _refused_in_browser(console, page, form, run.run_id, "anything: not JSON")
        await page.type(f'{form} textarea[name="anything"]', '{"a": [1, null]}')
        assert await _valid(page, form, "anything")
        await page.click(f'{form} fieldset[data-path="meta"] > button.add')
        await page.type(f'{form} input[name="meta.0.key"]', "k")
        await page.type(f'{form} textarea[name="meta.0"]', '{"deep": true')
        assert not await _valid(page, form, "meta.0")
        shown = await _refused_in_browser(console, page, form, run.run_id, "meta.k: not JSON")
        assert "INVALID_PAYLOAD" not in shown  # the browser refused it: nothing was sent
        await page.type(f'{form} textarea[name="meta.0"]', '{"deep": true}')
        await page.type(f'{form} textarea[name="rows"]', '"x"')
        await _refused_in_browser(
            console, page, form, run.run_id, "rows: expected a JSON list, got a string"
        )
        await page.type(f'{form} textarea[name="rows"]', '[1, "two", {"three": 3}]')
        await page.type(f'{form} textarea[name="blob"]', "7")
        await page.type(f'{form} textarea[name="thing"]', '"text"')
        await page.screenshot("hooks-any-json-form.png")
        assert await _resumed(page, form, run) == {
            "anything": {"a": [1, None]},
            "meta": {"k": {"deep": True}},
            "blob": 7,
            "thing": "text",
            "rows": [1, "two", {"three": 3}],
        }
