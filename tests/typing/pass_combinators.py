"""Must pass ``mypy --strict``: ``gather``, ``race`` and ``any`` keep each argument's type."""

from __future__ import annotations

from typing import Any, assert_type

import wayline


@wayline.step
async def count(sku: str) -> int:
    return len(sku)


@wayline.step
def label(sku: str) -> str:
    return sku


@wayline.workflow
async def kid(n: int) -> bytes:
    return b"x" * n


@wayline.workflow
async def order(sku: str) -> None:
    hook = wayline.create_hook(f"approve:{sku}", type=bool)
    assert_type(await wayline.gather(count(sku), label(sku)), tuple[int, str])
    n, text, ok, raw, nothing = await wayline.gather(
        count(sku), label(sku), hook, wayline.child(kid, 1), wayline.sleep(1)
    )
    assert_type((n, text, ok, raw, nothing), tuple[int, str, bool, bytes, None])
    assert_type(await wayline.gather(), tuple[()])
    many = await wayline.gather(*[count(s) for s in ("a", "b", "c")])
    assert_type(many, tuple[int, ...])
    assert_type(await wayline.race(count(sku), wayline.sleep("1h")), tuple[int, int | None])
    assert_type(await wayline.race(*[label(s) for s in "ab"]), tuple[int, str])
    assert_type(await wayline.any(count(sku), label(sku)), int | str)
    assert_type(await wayline.any(*[count(s) for s in "ab"]), int)
    untyped = wayline.create_hook("free")
    assert_type(await wayline.any(untyped, count(sku)), Any | int)
