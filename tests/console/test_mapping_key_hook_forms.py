"""A typed hook whose class holds a mapping whose keys are not any string (issue #37):
``dict[int, str]``, a ``Literal`` key, an ``Enum`` key, a ``bool`` key and a list of
``dict[int, int]``, in a real browser on every world. Each key input is of the key's kind: a
whole-number input for an integer key, a choice of the values for a Literal, an Enum or a bool
key (before, each was a text input that took any key, which the server then refused). A key of
the wrong kind, a key left unchosen and two keys the class reads as one (``7`` and ``07``) are
refused in the browser, and the run ends with exactly the payload typed. Without the class, the
server refuses a wrong key by its place from the recorded shape alone (before, it took it)."""

from __future__ import annotations

import enum
from typing import Any, Literal

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
from tests.console.test_list_union_hook_forms import _choose


class Shade(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Ledger(pydantic.BaseModel):
    ids: dict[int, str]
    levels: dict[Literal["low", "high"], int] = {}
    shades: dict[Shade, int] = {}
    flags: dict[bool, int] = {}
    grid: list[dict[int, int]] = []


ledger = typed_hook_workflow("mapping_key_hook_forms.ledger", Ledger)


async def _entry(page: Page, form: str, at: str, key: str, value: str) -> None:
    """Type ``key`` and ``value`` into a mapping's entry ``at`` (``ids.0``)."""
    await page.type(f'{form} input[name="{at}.key"]', key)
    await page.type(f'{form} input[name="{at}"]', value)


async def _chosen(page: Page, form: str, place: str, offered: list[str], key: str) -> None:
    """Add an entry to the mapping ``place``, whose key is a choice of ``offered``; choose
    ``key``, unless it is empty."""
    await page.click(f'{form} fieldset[data-path="{place}"] > button.add')
    choice = f'{form} select[name="{place}.0.key"]'
    assert await _texts(page, f"{choice} > option") == ["(choose)", *offered]
    if key:
        await _choose(page, choice, key)


async def test_mapping_keys_are_typed_by_the_key_kind(console: Console, page: Page) -> None:
    async with console.engine.worker([ledger]):
        run, form = await _form(console, page, ledger)
        ids = f'{form} fieldset[data-path="ids"]'
        for _ in range(2):
            await page.click(f"{ids} > button.add")
        kind = await page.script(
            f"return document.querySelector('{ids} input[name=\"ids.0.key\"]').type"
        )
        assert kind == "number"
        await _entry(page, form, "ids.0", "7", "seven")
        await _entry(page, form, "ids.1", "1.5", "eight")
        await _refused_in_browser(console, page, form, run.run_id, "ids[1]: key expected integer")
        await page.type(f'{form} input[name="ids.1.key"]', "07")
        await _refused_in_browser(console, page, form, run.run_id, 'ids[1]: key "7" given twice')
        await page.type(f'{form} input[name="ids.1.key"]', "8")

        await _chosen(page, form, "levels", ['"low"', '"high"'], "")
        await page.type(f'{form} input[name="levels.0"]', "3")
        await _refused_in_browser(console, page, form, run.run_id, "levels[0]: key required")
        await _choose(page, f'{form} select[name="levels.0.key"]', '"high"')
        await _chosen(page, form, "shades", ['"red"', '"blue"'], '"blue"')
        await page.type(f'{form} input[name="shades.0"]', "4")
        await _chosen(page, form, "flags", ["true", "false"], "false")
        await page.type(f'{form} input[name="flags.0"]', "5")

        grid = f'{form} fieldset[data-path="grid"]'
        await page.click(f"{grid} > button.add")
        await page.click(f'{grid} fieldset[data-path="grid.0"] > button.add')
        await _entry(page, form, "grid.0.0", "-2", "6")
        await page.screenshot("hooks-mapping-key-form.png")
        assert await _resumed(page, form, run) == {
            "ids": {"7": "seven", "8": "eight"},
            "levels": {"high": 3},
            "shades": {"blue": 4},
            "flags": {"false": 5},
            "grid": [{"-2": 6}],
        }


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_mapping_key_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {"ids": {"1": "a"}, "levels": {"low": 1}, "grid": [{"2": 3}]}
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                ledger,
                [
                    ({"ids": {"one": "a"}}, "ids.one"),
                    ({"ids": {}, "levels": {"mid": 1}}, "levels.mid"),
                    ({"ids": {}, "shades": {"green": 1}}, "shades.green"),
                    ({"ids": {}, "flags": {"maybe": 1}}, "flags.maybe"),
                    ({"ids": {}, "grid": [{"x": 1}]}, "grid"),
                ],
                good,
            )
        ],
    )
