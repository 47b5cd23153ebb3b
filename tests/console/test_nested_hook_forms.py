"""A typed hook whose class holds a nested model (a pydantic model holding a dataclass, here)
gets a fieldset of inputs per nested model, in a real browser, on every world: a nested field
left empty is refused in the browser, a value only the class refuses is refused by the server
(422, shown on the page), the run keeps waiting after both, and the payload sent is nested as
the class is."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import pydantic

import wayline
from tests.console.browser import Page
from tests.console.conftest import TOKEN, Console
from tests.console.test_hook_forms import _received


@dataclasses.dataclass
class Door:
    street: str
    floor: Annotated[int, pydantic.Field(ge=0)]  # the class's rule: the server checks it


class Delivery(pydantic.BaseModel):
    recipient: str
    door: Door
    backup: Door | None = None


@wayline.workflow(name="nested_hook_forms.deliver")
async def deliver(order: str) -> str:
    answer = await wayline.create_hook(f"deliver:{order}", type=Delivery)
    backup = answer.backup.street if answer.backup else "none"
    return f"{answer.recipient}: {answer.door.street}, floor {answer.door.floor}; {backup}"


async def test_a_nested_model_is_answered_through_its_fieldset(
    console: Console, page: Page
) -> None:
    client = console.engine.client
    async with console.engine.worker([deliver]):
        run = await client.start(deliver, "n1")
        await client.wait_for_hook("deliver:n1", timeout=10)
        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")
        form = 'form[data-token="deliver:n1"]'
        await page.text(f'{form} fieldset[data-path="door"] legend', "door")
        await page.type(f'{form} input[name="recipient"]', "ana")
        await page.type(f'{form} input[name="door.floor"]', "2")
        await page.click(f"{form} button")
        await page.text(f"{form} .said", "door.street: required")  # refused in the browser
        assert await _received(console, run.run_id) == 0

        await page.type(f'{form} input[name="door.street"]', "Rua Augusta 12")
        await page.type(f'{form} input[name="door.floor"]', "-1")
        await page.click(f"{form} button")
        said = await page.text(f"{form} .said", "INVALID_PAYLOAD")  # refused by the server
        assert "floor" in said
        assert await _received(console, run.run_id) == 0
        assert (await client.get_run(run.run_id)).status == "running"

        await page.type(f'{form} input[name="door.floor"]', "3")
        await page.click(f"{form} button")  # the optional backup left empty is not sent
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "ana: Rua Augusta 12, floor 3; none"
