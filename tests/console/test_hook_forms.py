"""A typed hook answered through the form the hooks page builds from its recorded type, in a
real browser, on every world: a required field left empty is refused in the browser, a value
the shape allows but the class does not is refused by the server (422, shown on the page),
the run keeps waiting after both, and Approve sends the payload the fields say."""

from __future__ import annotations

import pydantic

import wayline
from tests.console.browser import Page
from tests.console.conftest import TOKEN, Console
from wayline._core.events import EventType


class Refund(pydantic.BaseModel):
    approved: bool
    by: str
    amount: int = pydantic.Field(ge=1, le=500)  # the range is the class's: the server checks it
    note: str | None = None


class Address(pydantic.BaseModel):
    street: str
    floor: int


@wayline.workflow(name="hook_forms.refund")
async def refund(order: str) -> str:
    answer = await wayline.create_hook(f"refund:{order}", type=Refund)
    verdict = "approved" if answer.approved else "rejected"
    return f"refund {answer.amount} {verdict} by {answer.by} ({answer.note})"


@wayline.workflow(name="hook_forms.address")
async def address(order: str) -> str:
    answer = await wayline.create_hook(f"address:{order}", type=Address)
    return f"{answer.street}, floor {answer.floor}"


async def _received(console: Console, run_id: str) -> int:
    events = await console.engine.client.handle(run_id).events()
    return sum(e.type is EventType.HOOK_RECEIVED for e in events)


async def test_a_typed_hook_approved_through_its_form(console: Console, page: Page) -> None:
    client = console.engine.client
    async with console.engine.worker([refund, address]):
        run = await client.start(refund, "o7")
        other = await client.start(address, "o7")
        await client.wait_for_hook("refund:o7", timeout=10)
        await client.wait_for_hook("address:o7", timeout=10)

        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")  # the tab ends the field: the page keeps it
        form = 'form[data-token="refund:o7"]'
        await page.type(f'{form} input[name="amount"]', "20")
        await page.click(f"{form} button.approve")
        await page.text(f"{form} .said", "by: required")  # refused in the browser
        assert await _received(console, run.run_id) == 0

        await page.type(f'{form} input[name="by"]', "ana")
        await page.type(f'{form} input[name="amount"]', "900")
        await page.click(f"{form} button.approve")
        said = await page.text(f"{form} .said", "INVALID_PAYLOAD")  # refused by the server
        assert "amount" in said
        await page.screenshot("hooks-refused.png")
        assert await _received(console, run.run_id) == 0
        assert (await client.get_run(run.run_id)).status == "running"

        await page.type(f'{form} input[name="amount"]', "120")
        await page.click(f"{form} button.approve")
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "refund 120 approved by ana (None)"

        # a typed hook with no approval field: a form of its fields and a Resume button
        form = 'form[data-token="address:o7"]'
        assert await page.script(f"return document.querySelector('{form} button.approve')") is None
        await page.type(f'{form} input[name="street"]', "Rua Augusta 12")
        await page.type(f'{form} input[name="floor"]', "3")
        await page.screenshot("hooks-form.png")
        await page.click(f"{form} button")
        await page.text(f"{form} .said", "resumed")
        assert await other.result(timeout=10) == "Rua Augusta 12, floor 3"


async def test_a_rejection_through_the_form(console: Console, page: Page) -> None:
    client = console.engine.client
    async with console.engine.worker([refund]):
        run = await client.start(refund, "o8")
        await client.wait_for_hook("refund:o8", timeout=10)
        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")
        form = 'form[data-token="refund:o8"]'
        await page.type(f'{form} input[name="by"]', "bo")
        await page.type(f'{form} input[name="amount"]', "5")
        await page.type(f'{form} input[name="note"]', "not ours")
        await page.click(f"{form} button.reject")
        await page.text(f"{form} .said", "resumed")
        assert await run.result(timeout=10) == "refund 5 rejected by bo (not ours)"
