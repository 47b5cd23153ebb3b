"""A typed hook whose class holds lists and unions of plain values (``list[int]``,
``int | str``, ``list[str]``, ``Literal[...]``) gets a real form for them, in a real browser,
on every world: a list's items are typed inputs added and removed one by one, a union of
plain types is a choice of the type and then its input, a literal a choice of its values; an
item left empty is refused in the browser by its place in the list, and the payload sent is
shaped as the class is. The server refuses a wrong item or value again, with a typed 422, with
the class or by the recorded shape alone, and the run keeps waiting."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

import wayline
from tests.console.browser import Page
from tests.console.conftest import AUTH, TOKEN, Console
from tests.console.test_hook_forms import _received
from tests.console.test_list_union_hook_forms import _choose, refused_each


class Survey(pydantic.BaseModel):
    scores: list[int]
    ref: int | str
    level: Literal["low", "high"]
    tags: list[str] = []


@wayline.workflow(name="plain_value_hook_forms.survey")
async def survey(order: str) -> str:
    answer = await wayline.create_hook(f"plain_value_hook_forms:{order}", type=Survey)
    return f"{answer.scores} {answer.ref!r} {answer.level} {answer.tags}"


async def _waiting(console: Console, order: str) -> tuple[wayline.RunHandle[str], str]:
    token = f"plain_value_hook_forms:{order}"
    run = await console.engine.client.start(survey, order)
    await console.engine.client.wait_for_hook(token, timeout=10)
    return run, token


async def _form(console: Console, page: Page, order: str) -> tuple[wayline.RunHandle[str], str]:
    """A run of ``survey`` waiting on its hook, and the hook's form on the hooks page, opened
    with the console's token."""
    run, token = await _waiting(console, order)
    await page.open("/hooks")
    await page.type("#token", TOKEN + "\t")
    return run, f'form[data-token="{token}"]'


async def test_plain_lists_unions_and_literals_are_answered_through_typed_inputs(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([survey]):
        run, form = await _form(console, page, "s1")
        scores = f'{form} fieldset[data-path="scores"]'
        for _ in range(3):
            await page.click(f"{scores} > button.add")
        # the items' inputs are number inputs, one per item
        kinds = await page.script(
            f"return [...document.querySelectorAll('{scores} input')].map((i) => i.type)"
        )
        assert kinds == ["number", "number", "number"]
        await page.click(f"{scores} label.item:nth-of-type(2) > button.remove")
        shown = await page.script(
            f"return [...document.querySelectorAll('{scores} label.item > span')]"
            ".map((s) => s.textContent)"
        )
        assert shown == ["scores[0]", "scores[1]"]  # each item named by its place now
        await page.type(f'{form} input[name="scores.0"]', "3")
        await _choose(page, f'{form} select[name="ref"]', "string")
        await page.type(f'{form} input[name="ref.string"]', "A-7")
        await _choose(page, f'{form} select[name="level"]', '"high"')
        await page.click(f"{form} > button")
        # refused in the browser: the third item, now the second, was left empty
        await page.text(f"{form} .said", "scores[1]: required")
        assert await _received(console, run.run_id) == 0

        await page.type(f'{form} input[name="scores.2"]', "5")
        await page.click(f'{form} fieldset[data-path="tags"] > button.add')
        await page.type(f'{form} input[name="tags.0"]', "blue")
        await page.screenshot("hooks-plain-value-form.png")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "[3, 5] 'A-7' high ['blue']"


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_plain_item_or_value_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Where the console does not have the hook's class, the recorded shape is what refuses."""
    if not with_class:
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name, **_: None)
    async with console.engine.worker([survey]):
        run, token = await _waiting(console, f"w-{with_class}")
        url = f"/api/hooks/{token}/resume"
        good = {"scores": [1, 2], "ref": 7, "level": "low", "tags": ["a"]}
        wrong = [
            ({**good, "scores": [1, "many"]}, "scores"),
            ({**good, "tags": ["a", 3]}, "tags"),
            ({**good, "level": "medium"}, "level"),
            ({**good, "ref": [7]}, "ref"),
        ]
        await refused_each(console, url, wrong)
        assert await _received(console, run.run_id) == 0
        resumed = await console.http.post(url, json={"payload": good}, headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert await run.result(timeout=10) == "[1, 2] 7 low ['a']"


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_plain_value_the_class_takes_is_taken_with_or_without_the_class(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """The resume through the HTTP API gives one verdict whether or not the console has the
    hook's class: ``True``, ``"5"`` and ``2.0`` are integers to the class (pydantic's lax
    rules, as the workflow reads the payload), so the recorded shape takes them too; the
    shape alone used to refuse them with a 422 that the class would not give."""
    if not with_class:
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name, **_: None)
    async with console.engine.worker([survey]):
        run, token = await _waiting(console, f"lax-{with_class}")
        url = f"/api/hooks/{token}/resume"
        payload = {"scores": [True, "5", 2.0], "ref": 7, "level": "low"}
        resumed = await console.http.post(url, json={"payload": payload}, headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert await run.result(timeout=10) == "[1, 5, 2] 7 low []"


async def test_a_whole_number_the_browser_would_round_is_refused_in_the_form(
    console: Console, page: Page
) -> None:
    """A whole number past 2^53 typed in an integer input was rounded by the browser and sent
    as another number (9007199254740993 as ...992), which the server took; now the form
    refuses it by its place and sends nothing, and a number it holds exactly is sent."""
    async with console.engine.worker([survey]):
        run, form = await _form(console, page, "big")
        await page.click(f'{form} fieldset[data-path="scores"] > button.add')
        await page.type(f'{form} input[name="scores.0"]', "9007199254740993")
        await _choose(page, f'{form} select[name="ref"]', "integer")
        await page.type(f'{form} input[name="ref.integer"]', "7")
        await _choose(page, f'{form} select[name="level"]', '"low"')
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "scores[0]: 9007199254740993 is too large for the form")
        assert await _received(console, run.run_id) == 0
        await page.type(f'{form} input[name="scores.0"]', "9007199254740991")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "[9007199254740991] 7 low []"
