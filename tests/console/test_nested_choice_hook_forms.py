"""Review of the forms merge: choices nested in lists (a list of lists whose item is a mapping
with integer keys or a list, a list of mappings whose values are choices, a nullable choice
with a bool-keyed mapping), answered through the form in a real browser."""

from __future__ import annotations

import pydantic

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.test_deep_hook_forms import _form, _resumed, _texts, typed_hook_workflow
from tests.console.test_list_union_hook_forms import _choose


class Coin(pydantic.BaseModel):
    value: int


class Note(pydantic.BaseModel):
    text: str


class Nest(pydantic.BaseModel):
    grid: list[list[dict[int, int] | list[int]]] = []
    book: list[dict[str, Coin | Note | dict[int, int]]] = []
    opt: list[dict[bool, int] | Coin | Note | None] = []


nest = typed_hook_workflow("nested_choice_hook_forms.nest", Nest)


async def _add(page: Page, form: str, place: str) -> None:
    await page.click(f'{form} fieldset[data-path="{place}"] > button.add')


async def test_choices_nested_in_lists_are_answered(console: Console, page: Page) -> None:
    async with console.engine.worker([nest]):
        run, form = await _form(console, page, nest)
        await _add(page, form, "grid")
        await _add(page, form, "grid.0")
        await _add(page, form, "grid.0")
        assert await _texts(page, f'{form} select[name="grid.0.0"] > option') == ["list", "mapping"]
        await _choose(page, f'{form} select[name="grid.0.0"]', "mapping")
        await _add(page, form, "grid.0.0.mapping")
        await page.type(f'{form} input[name="grid.0.0.mapping.0.key"]', "3")
        await page.type(f'{form} input[name="grid.0.0.mapping.0"]', "4")
        await _choose(page, f'{form} select[name="grid.0.1"]', "list")
        await _add(page, form, "grid.0.1.list")
        await page.type(f'{form} input[name="grid.0.1.list.0"]', "5")

        await _add(page, form, "book")
        await _add(page, form, "book.0")
        await page.type(f'{form} input[name="book.0.0.key"]', "k")
        assert await _texts(page, f'{form} select[name="book.0.0"] > option') == [
            "Coin",
            "Note",
            "mapping",
        ]
        await _choose(page, f'{form} select[name="book.0.0"]', "mapping")
        await _add(page, form, "book.0.0.mapping")
        await page.type(f'{form} input[name="book.0.0.mapping.0.key"]', "2")
        await page.type(f'{form} input[name="book.0.0.mapping.0"]', "1")

        await _add(page, form, "opt")
        await _add(page, form, "opt")
        assert await _texts(page, f'{form} select[name="opt.0"] > option') == [
            "(none)",
            "Coin",
            "Note",
            "mapping",
        ]
        await _choose(page, f'{form} select[name="opt.1"]', "mapping")
        await _add(page, form, "opt.1.mapping")
        await _choose(page, f'{form} select[name="opt.1.mapping.0.key"]', "true")
        await page.type(f'{form} input[name="opt.1.mapping.0"]', "6")
        assert await _resumed(page, form, run) == {
            "grid": [[{"3": 4}, [5]]],
            "book": [{"k": {"2": 1}}],
            "opt": [None, {"true": 6}],
        }
