"""Typed hooks whose class or recorded shape is hostile to the console, on every world: a union
that contains itself (an expression tree) still makes a hook a NATS message can hold, and the
console checks its payload by the recorded shape; a shape written into the log behind the
world's back, malformed in ways no writer makes, leaves the hooks page working for every other
hook; a hook payload whose small blob was removed behind the world's back is said at its place
while the run's page still opens."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
import pytest

import wayline
from tests.console.conftest import AUTH, Console
from tests.console.test_hook_forms import _received


class Leaf(pydantic.BaseModel):
    op: Literal["leaf"]
    value: int


class Flip(pydantic.BaseModel):
    op: Literal["flip"]
    arg: Term


class Sum(pydantic.BaseModel):
    op: Literal["sum"]
    left: Term
    right: Term


class Difference(pydantic.BaseModel):
    op: Literal["difference"]
    left: Term
    right: Term


class Product(pydantic.BaseModel):
    op: Literal["product"]
    left: Term
    right: Term


class Quotient(pydantic.BaseModel):
    op: Literal["quotient"]
    left: Term
    right: Term


Term = Annotated[
    Leaf | Flip | Sum | Difference | Product | Quotient, pydantic.Field(discriminator="op")
]
for _node in (Flip, Sum, Difference, Product, Quotient):
    _node.model_rebuild()


class Sheet(pydantic.BaseModel):
    term: Term
    notes: list[Term] = []


def _value(term: Leaf | Flip | Sum | Difference | Product | Quotient) -> int:
    match term:
        case Leaf(value=value):
            return value
        case Flip(arg=arg):
            return -_value(arg)
        case Sum(left=left, right=right):
            return _value(left) + _value(right)
        case Difference(left=left, right=right):
            return _value(left) - _value(right)
        case Product(left=left, right=right):
            return _value(left) * _value(right)
        case Quotient(left=left, right=right):
            return _value(left) // _value(right)


@wayline.workflow(name="hostile_hook_shapes.sheet")
async def sheet(name: str) -> int:
    answer = await wayline.create_hook(f"hostile_hook_shapes.sheet:{name}", type=Sheet)
    return _value(answer.term)


@pytest.mark.parametrize("with_class", [True, False], ids=["class", "shape"])
async def test_a_hook_whose_class_is_a_union_that_contains_itself_is_created_and_checked(
    console: Console, monkeypatch: pytest.MonkeyPatch, with_class: bool
) -> None:
    """Its shape followed four levels deep was 1.4 MB: on NATS the ``hook_created`` append
    failed (maximum payload exceeded) at every delivery, and the run never waited."""
    if not with_class:  # a console that cannot import the class checks the recorded shape
        monkeypatch.setattr("wayline._sdk.hooks.find_type", lambda name: None)
    client = console.engine.client
    token = f"hostile_hook_shapes.sheet:{with_class}"
    async with console.engine.worker([sheet]):
        run = await client.start(sheet, str(with_class))
        await client.wait_for_hook(token, timeout=20)
        (hook,) = (await console.http.get(f"/api/hooks?run={run.run_id}")).json()["hooks"]
        assert [b["value"] for b in hook["shape"]["unions"]["term"]["branches"]][:3] == [
            "leaf",
            "flip",
            "sum",
        ]
        url = f"/api/hooks/{token}/resume"
        two = {"op": "leaf", "value": 2}
        wrong = {"op": "sum", "left": {"op": "leaf"}, "right": two}
        refused = await console.http.post(url, json={"payload": {"term": wrong}}, headers=AUTH)
        assert refused.status_code == 422, refused.text
        why = refused.json()["error"]["message"]
        assert "term." in why and "left." in why and "value: Field required" in why
        assert await _received(console, run.run_id) == 0
        good = {"op": "flip", "arg": {"op": "product", "left": two, "right": {**two, "value": 3}}}
        resumed = await console.http.post(url, json={"payload": {"term": good}}, headers=AUTH)
        assert resumed.status_code == 200, resumed.text
        assert await run.result(timeout=20) == -6
