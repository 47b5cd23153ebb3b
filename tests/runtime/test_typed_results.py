"""What the SDK's types promise is what a workflow and a client get at run time (both worlds):
``gather`` gives a tuple, as it is typed, whether its members are steps, hooks or nothing;
``race`` gives ``(index, value)``; and a handle found by id with its workflow decodes the
result as the workflow's result type, as the handle ``start`` returns does."""

from __future__ import annotations

import dataclasses

import pytest

import wayline
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


@dataclasses.dataclass
class TypedReceipt:
    order_id: str
    cents: int


@wayline.step(max_retries=0)
async def typed_count(sku: str) -> int:
    return len(sku)


@wayline.step(max_retries=0)
def typed_label(sku: str) -> str:
    return sku.upper()


@wayline.workflow
async def typed_gather(sku: str) -> dict[str, object]:
    pair = await wayline.gather(typed_count(sku), typed_label(sku))
    hook = wayline.create_hook(f"typed:{sku}", type=int)
    with_hook = await wayline.gather(hook, typed_count(sku))
    empty = await wayline.gather()
    index, value = await wayline.race(typed_label(sku), wayline.sleep("1h"))
    return {
        "kinds": [type(pair).__name__, type(with_hook).__name__, type(empty).__name__],
        "pair": pair,
        "withHook": with_hook,
        "race": [index, value],
    }


@wayline.workflow
async def typed_receipt(order_id: str) -> TypedReceipt:
    return TypedReceipt(order_id, 1250)


async def test_gather_gives_a_tuple_as_typed(engine: Engine) -> None:
    async with engine.worker([typed_gather]):
        handle = await engine.client.start(typed_gather, "book")
        await engine.client.wait_for_hook("typed:book", timeout=20)
        await engine.client.resume_hook("typed:book", 7)
        out = await handle.result(timeout=20)
    assert out["kinds"] == ["tuple", "tuple", "tuple"]
    assert out["pair"] == [4, "BOOK"]  # a tuple is written to the log as a JSON array
    assert out["withHook"] == [7, 4]
    assert out["race"] == [0, "BOOK"]


async def test_a_handle_found_by_id_with_its_workflow_decodes_the_result(engine: Engine) -> None:
    async with engine.worker([typed_receipt]):
        started = await engine.client.start(typed_receipt, "o-1")
        await started.result(timeout=20)
    found = engine.client.handle(typed_receipt, started.run_id)
    assert found.run_id == started.run_id
    assert await found.result(timeout=20) == TypedReceipt("o-1", 1250)
    # Without the workflow, the result stays the stored JSON, as before.
    assert await engine.client.handle(started.run_id).result(timeout=20) == {
        "order_id": "o-1",
        "cents": 1250,
    }


async def test_a_handle_refuses_arguments_it_cannot_read(engine: Engine) -> None:
    with pytest.raises(TypeError, match=r"Client.handle takes \(run_id\) or \(workflow, run_id\)"):
        engine.client.handle(42)  # type: ignore[call-overload]
