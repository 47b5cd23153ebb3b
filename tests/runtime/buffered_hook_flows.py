"""Workflows for the tests of payloads sent before the wait."""

from __future__ import annotations

from typing import Any

import wayline
from tests.runtime.sdk_flows import Approval


@wayline.workflow
async def first_payload(token: str) -> Any:
    hook = wayline.create_hook(token, timeout="1h")
    return await hook


@wayline.workflow
async def typed_approval(token: str) -> list[Any]:
    approval = await Approval.wait(token, timeout="1h")
    return [approval.approved, approval.by]
