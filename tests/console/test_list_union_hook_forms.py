"""A typed hook whose class holds a list of models and unions of models (a discriminated union
and an optional plain one) gets real form rows for them, in a real browser, on every world:
items are added and removed one by one, a union's branch is chosen from a list, an item left
half filled is refused in the browser by its place in the list, a value only the class
refuses is refused by the server (422, shown on the page), the run keeps waiting after both,
and the payload sent is shaped as the class is. Without the class (a console that cannot
import it) the server still refuses a wrong list item or branch by the recorded shape."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
import pytest
from selenium.webdriver.support.ui import Select

import wayline
from tests.console.browser import Page
from tests.console.conftest import AUTH, TOKEN, Console
from tests.console.test_hook_forms import _received


class Line(pydantic.BaseModel):
    sku: str
    qty: Annotated[int, pydantic.Field(ge=1)]  # the class's rule: the server checks it


class Transfer(pydantic.BaseModel):
    kind: Literal["transfer"]
    iban: str


class Cash(pydantic.BaseModel):
    kind: Literal["cash"]
    change_for: int


class Pickup(pydantic.BaseModel):
    shop: str


class Courier(pydantic.BaseModel):
    street: str
    floor: int


class Paper(pydantic.BaseModel):
    colour: str


class Box(pydantic.BaseModel):
    size: int


class Gift(pydantic.BaseModel):
    wrap: Paper | Box  # its choice shows a branch at once: nothing typed still leaves it out


class Checkout(pydantic.BaseModel):
    lines: list[Line]
    pay: Annotated[Transfer | Cash, pydantic.Field(discriminator="kind")]
    where: Pickup | Courier | None = None
    gift: Gift | None = None


@wayline.workflow(name="list_union_hook_forms.checkout")
async def checkout(order: str) -> str:
    answer = await wayline.create_hook(f"checkout:{order}", type=Checkout)
    lines = ", ".join(f"{line.sku} x{line.qty}" for line in answer.lines)
    pay = answer.pay.iban if isinstance(answer.pay, Transfer) else answer.pay.change_for
    where = answer.where.street if isinstance(answer.where, Courier) else answer.where
    return f"{lines}; {answer.pay.kind} {pay}; {where}; gift {answer.gift}"


async def _choose(page: Page, css: str, branch: str) -> None:
    await page.act(css, lambda element: Select(element).select_by_visible_text(branch), "choose")


async def _waiting(console: Console, order: str) -> tuple[wayline.RunHandle[str], str]:
    """A checkout started and waiting on its hook: its handle and its hook's token."""
    run = await console.engine.client.start(checkout, order)
    await console.engine.client.wait_for_hook(f"checkout:{order}", timeout=10)
    return run, f"checkout:{order}"


async def _refused_by_server(
    console: Console, page: Page, form: str, run_id: str, named: str
) -> None:
    """Send the form: the server refuses it (422, shown under the form, naming ``named``)
    and the run keeps waiting, with nothing received."""
    await page.click(f"{form} > button")
    said = await page.text(f"{form} .said", "INVALID_PAYLOAD")
    assert named in said
    assert await _received(console, run_id) == 0
    assert (await console.engine.client.get_run(run_id)).status == "running"


async def test_list_items_and_union_branches_are_answered_through_their_rows(
    console: Console, page: Page
) -> None:
    async with console.engine.worker([checkout]):
        run, token = await _waiting(console, "c1")
        await page.open("/hooks")
        await page.type("#token", TOKEN + "\t")
        form = f'form[data-token="{token}"]'
        lines = f'{form} fieldset[data-path="lines"]'
        for _ in range(3):
            await page.click(f"{lines} > button.add")
        await page.click(f'{lines} fieldset[data-path="lines.1"] > button.remove')
        legends = f"return [...document.querySelectorAll('{lines} fieldset.item > legend')]"
        shown = await page.script(legends + ".map((legend) => legend.textContent)")
        assert shown == ["lines[0]", "lines[1]"]  # each item named by its place now
        await page.type(f'{form} input[name="lines.0.sku"]', "apple")
        await page.type(f'{form} input[name="lines.0.qty"]', "1")
        await page.type(f'{form} input[name="lines.2.qty"]', "2")
        await _choose(page, f'{form} select[name="pay"]', "Cash")
        await page.type(f'{form} input[name="pay.Cash.change_for"]', "50")
        await page.click(f"{form} > button")
        # refused in the browser, named by the item's place in the list as it is now
        await page.text(f"{form} .said", "lines[1].sku: required")
        assert await _received(console, run.run_id) == 0

        await page.type(f'{form} input[name="lines.2.sku"]', "pear")
        await page.type(f'{form} input[name="lines.2.qty"]', "0")
        await _choose(page, f'{form} select[name="where"]', "Courier")
        await page.type(f'{form} input[name="where.Courier.street"]', "Rua Augusta 12")
        await page.type(f'{form} input[name="where.Courier.floor"]', "3")
        await _refused_by_server(console, page, form, run.run_id, "lines.1.qty")

        await page.type(f'{form} input[name="lines.2.qty"]', "2")
        await page.screenshot("hooks-list-union-form.png")
        await page.click(f"{form} > button")
        await page.text(f"{form} .said", "resumed")
        assert (
            await run.result(timeout=10) == "apple x1, pear x2; cash 50; Rua Augusta 12; gift None"
        )


async def refused_each(console: Console, url: str, wrong: list[tuple[object, str]]) -> None:
    """Each payload resumed at ``url`` is a typed 422 whose message names its field."""
    for payload, named in wrong:
        answer = await console.http.post(url, json={"payload": payload}, headers=AUTH)
        assert answer.status_code == 422, (payload, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "INVALID_PAYLOAD" and named in error["message"], payload


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_wrong_list_item_or_branch_is_a_typed_422_and_loses_nothing(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Where the console cannot import the hook's class, the recorded shape is what refuses."""
    if not with_class:
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name, **_: None)
    async with console.engine.worker([checkout]):
        run, token = await _waiting(console, f"w-{with_class}")
        url = f"/api/hooks/{token}/resume"
        good = {"lines": [{"sku": "a", "qty": 1}], "pay": {"kind": "transfer", "iban": "PT50"}}
        wrong = [
            ({**good, "lines": [{"sku": "a", "qty": 1}, {"qty": 1}]}, "lines"),
            ({**good, "lines": ["a"]}, "lines"),
            ({**good, "pay": {"kind": "cheque"}}, "pay"),
            ({**good, "pay": {"kind": "cash", "iban": "1"}}, "change_for"),
            ({**good, "where": {"street": "x"}}, "where"),
        ]
        await refused_each(console, url, wrong)
        assert await _received(console, run.run_id) == 0
        resumed = await console.http.post(url, json={"payload": good}, headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert await run.result(timeout=10) == "a x1; transfer PT50; None; gift None"
