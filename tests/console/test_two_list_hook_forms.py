"""A typed hook whose class holds a union of two kinds of list (``list[int] | list[str]``, issue
#37), as a field and as a list's item (with *(none)* where the item may be null), in a real
browser on every world: each is a *kind* choice of its lists, named by their items
(``list[integer]``, ``list[string]``), each with its rows. A value left out is refused in the
browser by its place, a value only the class refuses is refused by the server (422, shown on the
page), and the run ends with exactly the payload typed. Without the class the server refuses a
list that mixes the kinds by the recorded shape alone (before, it took it)."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
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

Small = Annotated[int, pydantic.Field(le=9)]  # the class's rule: the server checks it


class TwoKinds(pydantic.BaseModel):
    ids: list[Small] | list[str]
    rows: list[list[int] | list[str] | None] = []


kinds = typed_hook_workflow("two_list_hook_forms.kinds", TwoKinds)


async def test_a_union_of_two_lists_is_answered_through_a_choice_of_its_list(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([kinds]):
        run, form = await _form(console, page, kinds)
        choices = await _texts(page, f'{form} select[name="ids"] > option')
        assert choices == ["list[integer]", "list[string]"]
        await _choose(page, f'{form} select[name="ids"]', "list[integer]")
        ints = f'{form} fieldset[data-path="ids.list[integer]"]'
        await page.click(f"{ints} > button.add")
        await _refused_in_browser(console, page, form, run.run_id, "ids[0]: required")
        await page.type(f'{form} input[name="ids.list[integer].0"]', "12")
        await _refused_by_server(console, page, form, run.run_id, "ids")

        await _choose(page, f'{form} select[name="ids"]', "list[string]")
        strs = f'{form} fieldset[data-path="ids.list[string]"]'
        await page.click(f"{strs} > button.add")
        await page.type(f'{form} input[name="ids.list[string].0"]', "a7")
        rows = f'{form} fieldset[data-path="rows"]'
        for _ in range(2):
            await page.click(f"{rows} > button.add")
        assert await _texts(page, f'{form} select[name="rows.0"] > option') == [
            "(none)",
            "list[integer]",
            "list[string]",
        ]
        await _choose(page, f'{form} select[name="rows.0"]', "list[integer]")
        await page.click(f'{form} fieldset[data-path="rows.0.list[integer]"] > button.add')
        await page.type(f'{form} input[name="rows.0.list[integer].0"]', "3")
        sent = {"ids": ["a7"], "rows": [[3], None]}
        assert await _resumed(page, form, run) == sent


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_list_mixing_two_kinds_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {"ids": ["a", "b"], "rows": [[1], ["x"], None]}
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                kinds,
                [
                    ({"ids": [1, "a"]}, "ids"),
                    ({"ids": [1], "rows": [[1, "x"]]}, "rows"),
                    ({"ids": [1], "rows": [5]}, "rows"),
                ],
                good,
            )
        ],
    )
