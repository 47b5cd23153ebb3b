"""A typed hook whose class refuses unknown keys (``ConfigDict(extra="forbid")``, issue #37), at
the top, in a nested model and in a list's model, in a real browser on every world: its form
sends only the keys the class names, a value left out is refused in the browser, a value only
the class refuses is refused by the server (422, shown on the page), and the run ends with
exactly the payload typed. Through the API an unknown key at any of those places is a typed 422
naming it, with the class and, where the console cannot import the class, by the recorded shape
alone (before it recorded ``closed`` the shape took such a key and the run received it)."""

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
    refused_with_or_without_class,
    typed_hook_workflow,
)
from tests.console.test_list_union_hook_forms import _refused_by_server

SHUT = pydantic.ConfigDict(extra="forbid")


class ShutBox(pydantic.BaseModel):
    model_config = SHUT
    size: Annotated[int, pydantic.Field(ge=1)]  # the class's rule: the server checks it


class ShutParcel(pydantic.BaseModel):
    model_config = SHUT
    label: str
    box: ShutBox
    extras: list[ShutBox] = []


parcel = typed_hook_workflow("closed_hook_forms.parcel", ShutParcel)


async def test_a_closed_model_is_answered_through_its_form_with_only_its_keys(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([parcel]):
        run, form = await _form(console, page, parcel)
        await page.type(f'{form} input[name="label"]', "north")
        await _refused_in_browser(console, page, form, run.run_id, "box.size: required")
        await page.type(f'{form} input[name="box.size"]', "0")
        await _refused_by_server(console, page, form, run.run_id, "size")
        await page.type(f'{form} input[name="box.size"]', "2")
        await page.click(f'{form} fieldset[data-path="extras"] > button.add')
        await page.type(f'{form} input[name="extras.0.size"]', "3")
        sent = {"label": "north", "box": {"size": 2}, "extras": [{"size": 3}]}
        assert await _resumed(page, form, run) == sent


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_an_unknown_key_of_a_closed_model_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    good: dict[str, Any] = {"label": "a", "box": {"size": 1}, "extras": [{"size": 2}]}
    await refused_with_or_without_class(
        console,
        monkeypatch,
        with_class,
        [
            (
                parcel,
                [
                    ({**good, "colour": "red"}, "colour"),
                    ({**good, "box": {"size": 1, "depth": 2}}, "box.depth"),
                    ({**good, "extras": [{"size": 2}, {"size": 3, "x": None}]}, "extras"),
                    ({**good, "label": None}, "label"),
                ],
                good,
            )
        ],
    )
