"""A typed hook whose list holds items that may be null (``list[int | None]``, ``list[None]``)
is answered through its form in a real browser, on every world: an item of such a list left
empty is sent as null, which the class takes, where the browser used to refuse it as required
(``slots[0]: required``) and send nothing."""

from __future__ import annotations

import pydantic

import wayline
from tests.console.browser import Page
from tests.console.conftest import TOKEN, Console
from tests.console.test_hook_forms import _received


class Slots(pydantic.BaseModel):
    slots: list[int | None]
    blanks: list[None] = []


@wayline.workflow(name="nullable_plain_items.book")
async def book(order: str) -> str:
    answer = await wayline.create_hook(f"nullable_plain_items:{order}", type=Slots)
    return f"{answer.slots} {answer.blanks}"


async def test_an_item_that_may_be_null_is_sent_as_null_when_left_empty(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([book]):
        token = "nullable_plain_items:n1"
        run = await console.engine.client.start(book, "n1")
        await console.engine.client.wait_for_hook(token, timeout=10)
        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")
        form = f'form[data-token="{token}"]'
        slots = f'{form} fieldset[data-path="slots"]'
        blanks = f'{form} fieldset[data-path="blanks"]'
        await page.click(f"{slots} > button.add")
        await page.click(f"{slots} > button.add")
        await page.type(f'{form} input[name="slots.1"]', "4")
        await page.click(f"{blanks} > button.add")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "[None, 4] [None]"
        assert await _received(console, run.run_id) == 1
