"""What the SDK's types promise is what a workflow and a client get at run time (both worlds):
``gather`` gives a tuple, as it is typed, whether its members are steps, hooks or nothing;
``race`` gives ``(index, value)``."""

from __future__ import annotations

import wayline
from tests.runtime.harness import Engine


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
