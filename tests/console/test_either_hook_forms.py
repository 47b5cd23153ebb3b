"""The last three shapes whose typed hooks fell back to one JSON text area get real forms, in a
real browser, on every world (issue #37): a list whose items are an optional list
(``list[list[int] | None]``), a list whose items are a model or a plain value (``list[Coin |
int]``) and a model or a list (``Coin | list[int]``, in a top-level field and in a nested
model's), and these nested in each other and in a literal. Each item or field is a choice of its
kind (with *(none)* where it may be null) and then that kind's fields or rows. For each, a value
left out is refused in the browser by its place, a value only the class refuses is refused by
the server (422, shown on the page), the run keeps waiting after both, and the run ends with
exactly the payload typed. Without the class the server refuses a wrong value by the shape."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pydantic
import pytest

from tests.console.browser import Page
from tests.console.conftest import Console
from tests.console.hook_forms import (
    Cases,
    _form,
    _refused_in_browser,
    _resumed,
    _texts,
    refused_with_or_without_class,
    typed_hook_workflow,
)
from tests.console.test_list_union_hook_forms import _choose, _refused_by_server

Whole = Annotated[int, pydantic.Field(ge=0)]  # the class's rule: the server checks it


class Coin(pydantic.BaseModel):
    code: Annotated[str, pydantic.Field(pattern=r"^[A-Z]+$")]


class Rows(pydantic.BaseModel):
    rows: list[list[Whole] | None]


class Mixed(pydantic.BaseModel):
    mixed: list[Coin | Whole]


class Inner(pydantic.BaseModel):
    pick: Coin | list[Whole] | None = None


class Either(pydantic.BaseModel):
    either: Coin | list[Whole]
    inner: Inner


class Nest(pydantic.BaseModel):
    deep: list[list[Coin | Whole] | None]
    wide: Coin | list[list[Whole] | None] | None = None
    level: list[Coin | Literal["low", "high"]] = []


rows = typed_hook_workflow("either_hook_forms.rows", Rows)
mixed = typed_hook_workflow("either_hook_forms.mixed", Mixed)
either = typed_hook_workflow("either_hook_forms.either", Either)
nest = typed_hook_workflow("either_hook_forms.nest", Nest)


async def _areas(page: Page, form: str) -> list[str]:
    """The names of the JSON text areas in the form (none, where every part has a form)."""
    found: list[str] = await page.script(
        f"return [...document.querySelectorAll('{form} textarea')].map((t) => t.name)"
    )
    return found


async def test_a_list_of_optional_lists_is_answered_through_a_choice_per_item(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([rows]):
        run, form = await _form(console, page, rows)
        assert await _areas(page, form) == []
        box = f'{form} fieldset[data-path="rows"]'
        for _ in range(4):
            await page.click(f"{box} > button.add")
        assert await _texts(page, f'{form} select[name="rows.0"] > option') == ["(none)", "list"]
        await page.click(f'{box} fieldset.item[data-path="rows.1"] > button.remove')
        # each item is named by its place now, the list inside it too
        assert await _texts(page, f"{box} fieldset.item > legend") == [
            "rows[0]",
            "rows[1]",
            "rows[2]",
        ]
        await _choose(page, f'{form} select[name="rows.0"]', "list")
        await page.click(f'{form} fieldset[data-path="rows.0.list"] > button.add')
        await page.click(f'{form} fieldset[data-path="rows.0.list"] > button.add')
        await _choose(page, f'{form} select[name="rows.3"]', "list")
        await page.click(f'{form} fieldset[data-path="rows.3.list"] > button.add')
        await page.type(f'{form} input[name="rows.0.list.0"]', "1")
        await page.type(f'{form} input[name="rows.3.list.0"]', "-3")
        await _refused_in_browser(console, page, form, run.run_id, "rows[0][1]: required")
        await page.type(f'{form} input[name="rows.0.list.1"]', "2.5")
        shown = await _refused_in_browser(console, page, form, run.run_id, "rows[0][1]: ")
        assert "required" not in shown, shown  # the browser says why: not a whole number

        await page.type(f'{form} input[name="rows.0.list.1"]', "2")
        await _refused_by_server(console, page, form, run.run_id, "rows")  # -3: below 0

        await page.type(f'{form} input[name="rows.3.list.0"]', "3")
        await page.screenshot("hooks-optional-lists-form.png")
        assert await _resumed(page, form, run) == {"rows": [[1, 2], None, [3]]}


async def test_a_list_of_models_or_integers_is_answered_through_a_choice_per_item(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([mixed]):
        run, form = await _form(console, page, mixed)
        assert await _areas(page, form) == []
        box = f'{form} fieldset[data-path="mixed"]'
        for _ in range(2):
            await page.click(f"{box} > button.add")
        assert await _texts(page, f'{form} select[name="mixed.0"] > option') == ["Coin", "integer"]
        await page.type(f'{form} input[name="mixed.0.Coin.code"]', "abc")
        await _choose(page, f'{form} select[name="mixed.1"]', "integer")
        await _refused_in_browser(console, page, form, run.run_id, "mixed[1]: required")
        await page.type(f'{form} input[name="mixed.1.integer"]', "2.5")
        shown = await _refused_in_browser(console, page, form, run.run_id, "mixed[1]: ")
        assert "required" not in shown, shown

        await page.type(f'{form} input[name="mixed.1.integer"]', "7")
        await _refused_by_server(console, page, form, run.run_id, "code")  # not capitals

        await page.type(f'{form} input[name="mixed.0.Coin.code"]', "ABC")
        assert await _resumed(page, form, run) == {"mixed": [{"code": "ABC"}, 7]}


async def test_a_model_or_a_list_is_answered_through_a_choice_of_its_kind(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([either]):
        run, form = await _form(console, page, either)
        assert await _areas(page, form) == []
        assert await _texts(page, f'{form} select[name="either"] > option') == ["Coin", "list"]
        picks = await _texts(page, f'{form} select[name="inner.pick"] > option')
        assert picks == ["(none)", "Coin", "list"]
        await _choose(page, f'{form} select[name="either"]', "list")
        await page.click(f'{form} fieldset[data-path="either.list"] > button.add')
        await page.click(f'{form} fieldset[data-path="either.list"] > button.add')
        await page.type(f'{form} input[name="either.list.0"]', "4")
        await _choose(page, f'{form} select[name="inner.pick"]', "Coin")
        await page.type(f'{form} input[name="inner.pick.Coin.code"]', "lower")
        await _refused_in_browser(console, page, form, run.run_id, "either[1]: required")

        await page.type(f'{form} input[name="either.list.1"]', "5")
        await _refused_by_server(console, page, form, run.run_id, "code")

        await page.type(f'{form} input[name="inner.pick.Coin.code"]', "UP")
        await page.screenshot("hooks-model-or-list-form.png")
        assert await _resumed(page, form, run) == {
            "either": [4, 5],
            "inner": {"pick": {"code": "UP"}},
        }


async def test_the_three_shapes_nested_in_each_other_are_answered_through_the_form(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([nest]):
        run, form = await _form(console, page, nest)
        assert await _areas(page, form) == []
        deep = f'{form} fieldset[data-path="deep"]'
        await page.click(f"{deep} > button.add")
        await page.click(f"{deep} > button.add")
        await _choose(page, f'{form} select[name="deep.0"]', "list")
        inner = f'{form} fieldset[data-path="deep.0.list"]'
        await page.click(f"{inner} > button.add")
        await page.click(f"{inner} > button.add")
        await _choose(page, f'{form} select[name="deep.0.list.0"]', "integer")
        await page.type(f'{form} input[name="deep.0.list.1.Coin.code"]', "OK")
        await _refused_in_browser(console, page, form, run.run_id, "deep[0][0]: required")
        await page.type(f'{form} input[name="deep.0.list.0.integer"]', "3")

        await _choose(page, f'{form} select[name="wide"]', "list")
        wide = f'{form} fieldset[data-path="wide.list"]'
        await page.click(f"{wide} > button.add")
        await page.click(f"{wide} > button.add")
        await _choose(page, f'{form} select[name="wide.list.1"]', "list")
        await page.click(f'{form} fieldset[data-path="wide.list.1.list"] > button.add')
        await page.type(f'{form} input[name="wide.list.1.list.0"]', "-8")

        await page.click(f'{form} fieldset[data-path="level"] > button.add')
        assert await _texts(page, f'{form} select[name="level.0"] > option') == ["Coin", "value"]
        await _choose(page, f'{form} select[name="level.0"]', "value")
        await _refused_in_browser(console, page, form, run.run_id, "level[0]: required")
        await _choose(page, f'{form} select[name="level.0.value"]', '"low"')
        await _refused_by_server(console, page, form, run.run_id, "wide")

        await page.type(f'{form} input[name="wide.list.1.list.0"]', "8")
        assert await _resumed(page, form, run) == {
            "deep": [[3, {"code": "OK"}], None],
            "wide": [None, [8]],
            "level": ["low"],
        }


async def _classified(page: Page, shape: dict[str, Any]) -> list[Any]:
    """What the form's classifier makes of each field of ``shape``: its kind (``json`` for a
    text area), and for a choice its branches' titles (``list:`` before a list's)."""
    found: list[Any] = await page.script(
        """
        const describe = (f) => f.kind === "union"
          ? [f.name, "union", f.branches.map((b) => b.list ? "list:" + b.title : b.title)]
          : f.input && f.input.tagName === "TEXTAREA" ? [f.name, "json"] : [f.name, f.kind];
        return wl.shapeFields(JSON.parse(arguments[0])).map(describe);
        """.replace("arguments[0]", json.dumps(json.dumps(shape)))
    )
    return found


async def test_the_classifier_gives_each_shape_a_form_and_a_forged_part_a_text_area(
    console: Console, page: Page
) -> None:
    from wayline._sdk.hooks import shape

    await page.open("/hooks")
    assert await _classified(page, shape(Either)) == [
        ["either", "union", ["Coin", "list:list"]],
        ["inner", "model"],
    ]
    assert await _classified(page, shape(Nest)) == [
        ["deep", "list"],
        ["wide", "union", ["Coin", "list:list"]],
        ["level", "list"],
    ]
    # a model titled "list" beside a list is named apart; an options part no writer makes
    # (no element, a single option) is JSON, as every forged part is
    forged = {
        "required": [],
        "fields": {"a": ["object", "array"], "b": ["array"], "c": ["array"], "d": ["array"]},
        "nested": {"a": {"required": [], "fields": {"x": ["integer"]}, "title": "list"}},
        "items": {
            "a": {"kinds": ["integer"]},
            "b": {"options": [{"nothing": 1}, {"kinds": ["integer"]}]},
            "c": {"options": [{"kinds": ["integer"]}]},
            "d": {"options": [{"list": {"kinds": ["integer"]}}, {"kinds": ["null"]}]},
        },
    }
    assert await _classified(page, forged) == [
        ["a", "union", ["list (model)", "list:list"]],
        ["b", "json"],
        ["c", "json"],
        ["d", "list"],
    ]


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_value_of_each_shape_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Where the console cannot import the hook's class, the recorded shape is what refuses."""
    cases: Cases = [
        (
            rows,
            [({"rows": [[1], "x"]}, "rows"), ({"rows": [[1, "x"]]}, "rows")],
            {"rows": [[1], None]},
        ),
        (
            mixed,
            [({"mixed": ["x"]}, "mixed"), ({"mixed": [{"kode": "A"}]}, "code")],
            {"mixed": [2, {"code": "A"}]},
        ),
        (
            either,
            [({"either": ["x"], "inner": {}}, "either"), ({"either": 3, "inner": {}}, "either")],
            {"either": {"code": "B"}, "inner": {"pick": [1]}},
        ),
        (
            nest,
            [({"deep": [["x"]]}, "deep"), ({"deep": [], "level": ["medium"]}, "level")],
            {"deep": [[1, {"code": "Z"}], None], "level": ["high", {"code": "Y"}]},
        ),
    ]
    await refused_with_or_without_class(console, monkeypatch, with_class, cases)


# ``shape(Either)`` as 337bb92 recorded it: the model of a model-or-list field had no title
EITHER_AT_337BB92: dict[str, Any] = {
    "required": ["either", "inner"],
    "fields": {"either": ["object", "array"], "inner": ["object"]},
    "nested": {
        "either": {"required": ["code"], "fields": {"code": ["string"]}},
        "inner": {
            "required": [],
            "fields": {"pick": ["object", "array", "null"]},
            "nested": {"pick": {"required": ["code"], "fields": {"code": ["string"]}}},
            "items": {"pick": {"kinds": ["integer"]}},
        },
    },
    "items": {"either": {"kinds": ["integer"]}},
}


async def test_a_forged_or_older_shape_gets_a_bounded_form_with_choices_named_apart(
    console: Console, page: Page
) -> None:
    """More options than the three a writer records are a forged log's (3,000 models were a
    fieldset each on every Add): the list is JSON. A model titled ``(none)`` beside the choice
    that sends nothing is named apart, as one titled ``list`` or ``integer`` is. A model-or-list
    field recorded before titles were is offered under the field's name, not ``branch 1``."""
    await page.open("/hooks")
    model = {"shape": {"required": [], "fields": {"x": ["integer"]}, "title": "T"}}
    forged = {
        "required": ["a"],
        "fields": {"a": ["object", "integer", "null"], "b": ["array"]},
        "nested": {"a": {"required": [], "fields": {"x": ["integer"]}, "title": "(none)"}},
        "items": {"b": {"options": [model, model, model, {"kinds": ["integer"]}]}},
    }
    assert await _classified(page, forged) == [
        ["a", "union", ["(none) (model)", "integer"]],
        ["b", "json"],
    ]
    assert (await _classified(page, EITHER_AT_337BB92))[0] == [
        "either",
        "union",
        ["either", "list:list"],
    ]


class Exact(pydantic.BaseModel):
    maybe: Coin | list[Whole] | None = None
    rows: list[list[int] | None]
    nest: list[list[list[int] | None] | str] = []


exact = typed_hook_workflow("either_hook_forms.exact", Exact)


async def test_the_form_sends_exactly_what_was_chosen_after_a_kind_is_switched(
    console: Console, page: Page
) -> None:
    """An empty list chosen is sent as ``[]``, not left out; a list at the bottom of three as
    ``[[[]]]``; ``0`` as ``0``; and an item whose kind was switched to *(none)* after its list
    was typed is sent as null, not as the list typed before."""
    async with console.engine.worker([exact]):
        run, form = await _form(console, page, exact)
        await _choose(page, f'{form} select[name="maybe"]', "list")
        rows = f'{form} fieldset[data-path="rows"]'
        for _ in range(3):
            await page.click(f"{rows} > button.add")
        await _choose(page, f'{form} select[name="rows.0"]', "list")
        await page.click(f'{form} fieldset[data-path="rows.0.list"] > button.add')
        await page.type(f'{form} input[name="rows.0.list.0"]', "0")
        await _choose(page, f'{form} select[name="rows.2"]', "list")
        await page.click(f'{form} fieldset[data-path="rows.2.list"] > button.add')
        await page.type(f'{form} input[name="rows.2.list.0"]', "5")
        await _choose(page, f'{form} select[name="rows.2"]', "(none)")
        await page.click(f'{form} fieldset[data-path="nest"] > button.add')
        await _choose(page, f'{form} select[name="nest.0"]', "list")
        await page.click(f'{form} fieldset[data-path="nest.0.list"] > button.add')
        await _choose(page, f'{form} select[name="nest.0.list.0"]', "list")
        assert await _resumed(page, form, run) == {
            "maybe": [],
            "rows": [[0], None, None],
            "nest": [[[]]],
        }
