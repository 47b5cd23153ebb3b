"""A typed hook whose class holds a mapping (issue #37): ``dict[str, int]``, ``dict[str,
Model]`` and a list's item that is a model or a mapping (``list[Model | dict[str, int]]``), in a
real browser on every world. A mapping is key/value rows with *Add* and *Remove*, each a key
input above its value's input or fieldset; a model-or-mapping item is a *kind* choice of the
model and ``mapping``. A key left out or given twice and a value left out are refused in the
browser, a value only the class refuses is refused by the server (422, shown on the page), and
the run ends with exactly the payload typed. Without the class the server refuses a wrong value
by its key from the recorded shape alone (before, it took it)."""

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


class Bin(pydantic.BaseModel):
    sku: Annotated[str, pydantic.Field(max_length=3)]  # the class's rule: the server checks it


class Shelf(pydantic.BaseModel):
    counts: dict[str, int]
    bins: dict[str, Bin] = {}
    rows: list[Bin | dict[str, int]] = []
    spare: Bin | dict[str, int] | None = None


shelf = typed_hook_workflow("mapping_hook_forms.shelf", Shelf)


async def test_mappings_are_answered_through_key_and_value_rows(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([shelf]):
        run, form = await _form(console, page, shelf)
        counts = f'{form} fieldset[data-path="counts"]'
        for _ in range(2):
            await page.click(f"{counts} > button.add")
        await page.type(f'{form} input[name="counts.0.key"]', "apple")
        await page.type(f'{form} input[name="counts.0"]', "3")
        await page.type(f'{form} input[name="counts.1"]', "4")
        await _refused_in_browser(console, page, form, run.run_id, "counts[1]: key required")
        await page.type(f'{form} input[name="counts.1.key"]', "apple")
        await _refused_in_browser(console, page, form, run.run_id, 'key "apple" given twice')
        await page.type(f'{form} input[name="counts.1.key"]', "pear")

        await page.click(f'{form} fieldset[data-path="bins"] > button.add')
        await page.type(f'{form} input[name="bins.0.key"]', "top")
        await _refused_in_browser(console, page, form, run.run_id, "bins.top.sku: required")
        await page.type(f'{form} input[name="bins.0.sku"]', "long")
        await _refused_by_server(console, page, form, run.run_id, "sku")
        await page.type(f'{form} input[name="bins.0.sku"]', "A1")

        rows = f'{form} fieldset[data-path="rows"]'
        for _ in range(2):
            await page.click(f"{rows} > button.add")
        assert await _texts(page, f'{form} select[name="rows.0"] > option') == ["Bin", "mapping"]
        await _choose(page, f'{form} select[name="rows.0"]', "Bin")
        await page.type(f'{form} input[name="rows.0.Bin.sku"]', "B2")
        await _choose(page, f'{form} select[name="rows.1"]', "mapping")
        await page.click(f'{form} fieldset[data-path="rows.1.mapping"] > button.add')
        await page.type(f'{form} input[name="rows.1.mapping.0.key"]', "x")
        await page.type(f'{form} input[name="rows.1.mapping.0"]', "7")
        spare = await _texts(page, f'{form} select[name="spare"] > option')
        assert spare == ["(none)", "Bin", "mapping"]
        await _choose(page, f'{form} select[name="spare"]', "mapping")
        await page.click(f'{form} fieldset[data-path="spare.mapping"] > button.add')
        await page.type(f'{form} input[name="spare.mapping.0.key"]', "__proto__")
        await page.type(f'{form} input[name="spare.mapping.0"]', "1")
        sent = {
            "counts": {"apple": 3, "pear": 4},
            "bins": {"top": {"sku": "A1"}},
            "rows": [{"sku": "B2"}, {"x": 7}],
            "spare": {"__proto__": 1},
        }
        assert await _resumed(page, form, run) == sent


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_mapping_value_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {"counts": {"a": 1}, "bins": {"b": {"sku": "x"}}, "rows": [{"y": 2}]}
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                shelf,
                [
                    ({"counts": {"a": "many"}}, "counts"),
                    ({"counts": {}, "bins": {"b": {}}}, "bins"),
                    ({"counts": {}, "rows": [{"y": "z"}]}, "rows"),
                ],
                good,
            )
        ],
    )
