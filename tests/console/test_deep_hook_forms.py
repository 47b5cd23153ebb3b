"""Typed hooks whose shapes fell back to one JSON text area get real typed forms, in a real
browser, on every world (issue #37): a model nested six levels deep (with a model that contains
itself beside it) gets a fieldset per level; a list of lists of numbers and a list of lists of
models get a list editor with Add and Remove at each level; a model-or-integer union gets a
choice of the type. For each, a value left out is refused in the browser by its place, a value
only the class refuses is refused by the server (422, shown on the page), the run keeps waiting
after both, and the run ends with exactly the payload typed. Without the class (a console that
cannot import it) the server still refuses a wrong value at those places by the recorded shape."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest

import wayline
from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.hook_forms import (
    Cases,
    _form,
    _open,
    _refused_in_browser,
    _resumed,
    _texts,
    _waiting,
    refused_with_or_without_class,
    typed_hook_workflow,
)
from tests.console.test_list_union_hook_forms import _choose, _refused_by_server


class D6(pydantic.BaseModel):
    code: Annotated[str, pydantic.Field(min_length=2)]  # the class's rule: the server checks it
    n: int


class D5(pydantic.BaseModel):
    d6: D6


class D4(pydantic.BaseModel):
    d5: D5


class D3(pydantic.BaseModel):
    d4: D4


class D2(pydantic.BaseModel):
    d3: D3


class D1(pydantic.BaseModel):
    d2: D2


class Chain(pydantic.BaseModel):
    value: int
    next: Chain | None = None  # a model that contains itself: followed as far as it is recorded


class Tower(pydantic.BaseModel):
    name: str
    d1: D1
    chain: Chain | None = None


class Cell(pydantic.BaseModel):
    x: int
    label: Annotated[str, pydantic.Field(max_length=3)]


class Grid(pydantic.BaseModel):
    rows: list[list[int]]
    cells: list[list[Cell]]


class Voucher(pydantic.BaseModel):
    code: Annotated[str, pydantic.Field(pattern=r"^[A-Z]+$")]


class Stamp(pydantic.BaseModel):
    count: int


class Tip(pydantic.BaseModel):
    amount: Voucher | int
    extra: Voucher | None = None
    via: Voucher | Stamp | str | None = None  # a union of models and a plain type, optional


tower = typed_hook_workflow("deep_hook_forms.tower", Tower)
grid = typed_hook_workflow("deep_hook_forms.grid", Grid)
tip = typed_hook_workflow("deep_hook_forms.tip", Tip)


async def test_a_model_nested_six_levels_deep_is_answered_through_its_fieldsets(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([tower]):
        run, form = await _form(console, page, tower)
        deep = "d1.d2.d3.d4.d5.d6"
        await page.text(f'{form} fieldset[data-path="{deep}"] > legend', "d6")
        # the model that contains itself: a fieldset per recorded level, the page still whole
        levels = await page.script(
            f"return document.querySelectorAll('{form} fieldset[data-path^=\"chain\"]').length"
        )
        assert 4 < levels <= 16
        await page.type(f'{form} input[name="name"]', "north")
        await page.type(f'{form} input[name="{deep}.n"]', "7")
        await _refused_in_browser(console, page, form, run.run_id, f"{deep}.code: required")

        await page.type(f'{form} input[name="{deep}.code"]', "a")
        await _refused_by_server(console, page, form, run.run_id, "code")

        await page.type(f'{form} input[name="{deep}.code"]', "ab")
        await page.type(f'{form} input[name="chain.value"]', "1")
        await page.type(f'{form} input[name="chain.next.value"]', "2")
        six = {"d6": {"code": "ab", "n": 7}}
        assert await _resumed(page, form, run) == {
            "name": "north",
            "d1": {"d2": {"d3": {"d4": {"d5": six}}}},
            "chain": {"value": 1, "next": {"value": 2}},
        }


async def test_lists_of_lists_are_answered_through_add_and_remove_at_each_level(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([grid]):
        run, form = await _form(console, page, grid)
        rows, cells = f'{form} fieldset[data-path="rows"]', f'{form} fieldset[data-path="cells"]'
        for _ in range(3):
            await page.click(f"{rows} > button.add")
        await page.click(f'{rows} fieldset[data-path="rows.1"] > button.remove')
        for _ in range(3):
            await page.click(f'{rows} fieldset[data-path="rows.0"] > button.add')
        await page.click(
            f'{rows} fieldset[data-path="rows.0"] [data-path="rows.0.2"] > button.remove'
        )
        await page.click(f'{rows} fieldset[data-path="rows.2"] > button.add')
        await page.click(f"{cells} > button.add")
        await page.click(f'{cells} fieldset[data-path="cells.0"] > button.add')
        legends = await _texts(page, f"{rows} fieldset.item > legend")
        assert legends == ["rows[0]", "rows[1]"]  # each list named by its place now
        await page.type(f'{form} input[name="rows.0.0"]', "1")
        await page.type(f'{form} input[name="rows.2.0"]', "3")
        await page.type(f'{form} input[name="cells.0.0.x"]', "5")
        await page.type(f'{form} input[name="cells.0.0.label"]', "abcd")
        await _refused_in_browser(console, page, form, run.run_id, "rows[0][1]: required")
        await page.type(f'{form} input[name="rows.0.1"]', "2.5")  # not a whole number
        shown = await _refused_in_browser(console, page, form, run.run_id, "rows[0][1]: ")
        assert "required" not in shown, shown  # the browser says why: not a whole number

        await page.type(f'{form} input[name="rows.0.1"]', "2")
        await _refused_by_server(console, page, form, run.run_id, "label")

        await page.type(f'{form} input[name="cells.0.0.label"]', "abc")
        await page.screenshot("hooks-list-of-lists-form.png")
        assert await _resumed(page, form, run) == {
            "rows": [[1, 2], [3]],
            "cells": [[{"x": 5, "label": "abc"}]],
        }


async def test_a_model_or_integer_union_is_answered_through_a_choice_of_its_type(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([tip]):
        run, form = await _form(console, page, tip)
        choices = await _texts(page, f'{form} select[name="amount"] > option')
        assert choices == ["Voucher", "integer"]
        await _choose(page, f'{form} select[name="amount"]', "integer")
        await _refused_in_browser(console, page, form, run.run_id, "amount: required")
        await page.type(f'{form} input[name="amount.integer"]', "2.5")
        shown = await _refused_in_browser(console, page, form, run.run_id, "amount: ")
        assert "required" not in shown, shown  # the browser says why: not a whole number

        await _choose(page, f'{form} select[name="amount"]', "Voucher")
        await page.type(f'{form} input[name="amount.Voucher.code"]', "abc")
        await _refused_by_server(console, page, form, run.run_id, "code")

        await _choose(page, f'{form} select[name="amount"]', "integer")
        await page.type(f'{form} input[name="amount.integer"]', "5")
        await page.type(f'{form} input[name="extra.code"]', "XY")
        via = await _texts(page, f'{form} select[name="via"] > option')
        assert via == ["(none)", "Voucher", "Stamp", "string"]
        await _choose(page, f'{form} select[name="via"]', "string")
        await page.type(f'{form} input[name="via.string"]', "desk")
        await page.screenshot("hooks-model-or-plain-form.png")
        sent = {"amount": 5, "extra": {"code": "XY"}, "via": "desk"}
        assert await _resumed(page, form, run) == sent


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_deep_value_list_of_lists_item_or_union_type_is_a_typed_422(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Where the console cannot import the hook's class, the recorded shape is what refuses:
    a field six levels deep and an item of a list of lists were past what it recorded."""
    six: dict[str, Any] = {"d6": {"n": 1}}
    deep = {"name": "t", "d1": {"d2": {"d3": {"d4": {"d5": six}}}}}
    cases: Cases = [
        (
            tower,
            [(deep, "code"), ({**deep, "chain": {"value": 1, "next": {"value": "x"}}}, "value")],
            {**deep, "d1": {"d2": {"d3": {"d4": {"d5": {"d6": {"n": 1, "code": "ok"}}}}}}},
        ),
        (
            grid,
            [
                ({"rows": [[1, "x"]], "cells": []}, "rows"),
                ({"rows": [1], "cells": []}, "rows"),
                ({"rows": [], "cells": [[{"label": "a"}]]}, "cells"),
                ({"rows": [], "cells": [{"x": 1, "label": "a"}]}, "cells"),
            ],
            {"rows": [[1], []], "cells": [[{"x": 1, "label": "a"}]]},
        ),
        (
            tip,
            [
                ({"amount": "lots"}, "amount"),
                ({"amount": {"code": 5}}, "code"),
                ({"amount": 1, "via": 7}, "via"),
                ({"amount": 1, "via": {"count": "x"}}, "via"),
            ],
            {"amount": {"code": "ABC"}},
        ),
    ]
    await refused_with_or_without_class(console, monkeypatch, with_class, cases)


def _forged_deep_shape(levels: int) -> dict[str, Any]:
    """A shape no writer makes: models nested ``levels`` deep and a list of lists ``levels``
    deep, each far below what the recorder follows (16 levels)."""
    inner: dict[str, Any] = {"required": ["x"], "fields": {"x": ["integer"]}}
    for _ in range(levels):
        inner = {"required": [], "fields": {"in": ["object"]}, "nested": {"in": inner}}
    element: dict[str, Any] = {"kinds": ["integer"]}
    for _ in range(levels):
        element = {"list": element}
    return {
        "required": [],
        "fields": {"in": ["object"], "deep": ["array"], "n": ["integer"]},
        "nested": {"in": inner},
        "items": {"deep": element},
    }


@wayline.workflow(name="deep_hook_forms.plain")
async def plain(name: str) -> str:
    return str(await wayline.create_hook(f"deep_hook_forms.plain:{name}"))


async def test_a_forged_shape_deeper_than_any_writer_records_leaves_a_bounded_form(
    console: Console, page: Page
) -> None:
    """A hook_created written into the log behind the world's back with a shape 300 levels
    deep: the form stops at its depth cap (a JSON text area below it), the page builds every
    other hook's form, and the form still sends."""
    from tests.hostile.poison import forge_event

    async with console.engine.worker([plain, grid]):
        run, _ = await _waiting(console, plain, "forged")
        beside, beside_token = await _waiting(console, grid, "beside-forged")
        token = "deep_hook_forms.forged"
        await forge_event(
            console.engine.world,
            run.run_id,
            "hook_created",
            {"token": token, "type": "nowhere:Deep", "shape": _forged_deep_shape(300)},
            cid="h-deep-forged",
        )
        form = await _open(page, token)
        await page.text(f"{form} > button", "Resume")  # the form is built
        boxes = await page.script(f"return document.querySelectorAll('{form} fieldset').length")
        assert 16 < boxes <= 40  # the cap (32 levels) and the list's own fieldset
        areas = await page.script(
            f"return [...document.querySelectorAll('{form} textarea')].map((t) => t.name)"
        )
        # below the cap, a model and a list of lists are JSON
        assert areas == ["in." * 32 + "in", "deep"]
        await page.text(f'form[data-token="{beside_token}"] fieldset[data-path="rows"]', "rows")
        await page.type(f'{form} input[name="n"]', "4")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "HOOK_NOT_FOUND")  # the server answered: it was sent
        said = await page.script("return document.getElementById('message').textContent")
        assert said == ""
        assert (await console.engine.client.get_run(beside.run_id)).status == "running"


class Counter(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(title="integer")  # titled as a plain type
    n: int


class TwinA(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(title="Twin")
    a: int


class TwinB(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(title="Twin")  # two models of one title
    b: str


class Clash(pydantic.BaseModel):
    amount: Counter | int
    pair: TwinA | TwinB


clash = typed_hook_workflow("deep_hook_forms.clash", Clash)


async def test_choices_whose_titles_collide_are_each_named_once(
    console: Console, page: Page
) -> None:
    """A model titled as a plain type (``integer``) and two models of one title (``Twin``):
    each choice of the type has a name of its own, and the one chosen is the one sent."""
    async with console.engine.worker([clash]):
        run, form = await _form(console, page, clash)
        amount = await _texts(page, f'{form} select[name="amount"] > option')
        assert amount == ["integer (model)", "integer"]
        assert await _texts(page, f'{form} select[name="pair"] > option') == ["Twin", "Twin (2)"]
        await _choose(page, f'{form} select[name="amount"]', "integer (model)")
        await page.type(f'{form} input[name="amount.integer (model).n"]', "3")
        await _choose(page, f'{form} select[name="pair"]', "Twin (2)")
        await page.type(f'{form} input[name="pair.Twin (2).b"]', "bee")
        assert await _resumed(page, form, run) == {"amount": {"n": 3}, "pair": {"b": "bee"}}
