"""A typed hook whose class holds a value that may be several kinds of thing the form took as
JSON (issue #37): a list's item that is a model or one of two kinds of list (``Coin |
list[int] | list[str]``), a field that is a mapping or one of two models (``dict[str, int] |
Coin | Note | None``), and a list's item that is a mapping or one of two models, or a mapping or
a list, in a real browser on every world. Each is a *kind* choice of each model, each list (by
its item) and ``mapping`` (before, each was a JSON text area). A value left out is refused in
the browser by its place, one only the class refuses by the server (422, shown on the page), and
the run ends with exactly the payload typed. Without the class the server refuses a wrong value
at those places by the recorded shape alone (before, it took it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.hook_forms import (
    _form,
    _refused_in_browser,
    _resumed,
    _texts,
    refused_with_or_without_class,
    typed_hook_workflow,
)
from tests.console.test_list_union_hook_forms import _choose, _refused_by_server
from tests.unit.test_choices_hook_shape import Purse

purse = typed_hook_workflow("choice_hook_forms.purse", Purse)


async def _add(page: Page, form: str, place: str, count: int = 1) -> None:
    for _ in range(count):
        await page.click(f'{form} fieldset[data-path="{place}"] > button.add')


async def test_several_kinds_of_thing_are_answered_through_a_choice(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([purse]):
        run, form = await _form(console, page, purse)
        await _add(page, form, "slots", 3)
        offered = await _texts(page, f'{form} select[name="slots.0"] > option')
        assert offered == ["Coin", "list[integer]", "list[string]"]
        await page.type(f'{form} input[name="slots.0.Coin.value"]', "0")
        await _choose(page, f'{form} select[name="slots.1"]', "list[integer]")
        await _add(page, form, "slots.1.list[integer]", 2)
        await page.type(f'{form} input[name="slots.1.list[integer].0"]', "1")
        await _choose(page, f'{form} select[name="slots.2"]', "list[string]")
        await _add(page, form, "slots.2.list[string]")
        await page.type(f'{form} input[name="slots.2.list[string].0"]', "a")
        await _refused_in_browser(console, page, form, run.run_id, "slots[1][1]: required")
        await page.type(f'{form} input[name="slots.1.list[integer].1"]', "2")
        await _refused_by_server(console, page, form, run.run_id, "value")
        await page.type(f'{form} input[name="slots.0.Coin.value"]', "5")

        offered = await _texts(page, f'{form} select[name="either"] > option')
        assert offered == ["(none)", "Coin", "Note", "mapping"]
        await _choose(page, f'{form} select[name="either"]', "mapping")
        await _add(page, form, "either.mapping")
        await page.type(f'{form} input[name="either.mapping.0.key"]', "k")
        await page.type(f'{form} input[name="either.mapping.0"]', "9")

        await _add(page, form, "mixed", 2)
        assert await _texts(page, f'{form} select[name="mixed.0"] > option') == [
            "Coin",
            "Note",
            "mapping",
        ]
        await _choose(page, f'{form} select[name="mixed.0"]', "Note")
        await page.type(f'{form} input[name="mixed.0.Note.text"]', "hi")
        await _choose(page, f'{form} select[name="mixed.1"]', "mapping")
        await _add(page, form, "mixed.1.mapping")
        await page.type(f'{form} input[name="mixed.1.mapping.0.key"]', "m")
        await page.type(f'{form} input[name="mixed.1.mapping.0"]', "4")

        await _add(page, form, "table")
        assert await _texts(page, f'{form} select[name="table.0"] > option') == [
            "list",
            "mapping",
        ]
        await _choose(page, f'{form} select[name="table.0"]', "list")
        await _add(page, form, "table.0.list")
        await page.type(f'{form} input[name="table.0.list.0"]', "3")
        await page.screenshot("hooks-choice-form.png")
        assert await _resumed(page, form, run) == {
            "slots": [{"value": 5}, [1, 2], ["a"]],
            "either": {"k": 9},
            "mixed": [{"text": "hi"}, {"m": 4}],
            "table": [[3]],
        }


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_choice_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {"slots": [["a"]], "either": {"text": "t"}, "table": [{"a": 1}]}
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                purse,
                [
                    ({"slots": [[1, "a"]]}, "slots"),
                    ({"slots": [5]}, "slots"),
                    ({"either": {"a": "x"}}, "either"),
                    ({"mixed": [{"a": "x"}]}, "mixed"),
                    ({"table": [["x"]]}, "table"),
                ],
                good,
            )
        ],
    )
