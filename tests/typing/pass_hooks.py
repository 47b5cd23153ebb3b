"""Must pass ``mypy --strict``: ``create_hook(type=T)`` gives a hook whose payloads are ``T``."""

from __future__ import annotations

import dataclasses
from typing import Any, assert_type

import wayline
from wayline import HookHandle


@dataclasses.dataclass
class Approval:
    approved: bool
    by: str


@wayline.workflow
async def approve(order_id: str) -> bool:
    hook = wayline.create_hook(f"approve:{order_id}", type=Approval, timeout="1d")
    assert_type(hook, HookHandle[Approval])
    assert_type(await hook, Approval)
    async for later in hook:
        assert_type(later, Approval)
    counts = wayline.create_hook("counts", type=list[int])
    assert_type(await counts, list[int])
    free = wayline.create_hook("free")
    assert_type(free, HookHandle[Any])
    assert_type(await free, Any)
    plain: wayline.Hook = free  # what create_hook returned before it was generic
    called = wayline.create_hook("called", type=Approval, webhook=True)
    assert_type(called, HookHandle[Approval])
    assert_type(called.webhook_url, str | None)
    print(plain)
    return (await hook).approved
