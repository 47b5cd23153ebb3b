"""Search attributes type-check as documented: keyword values at the call, a mapping in the
decorator and in StartOptions, and where=/since=/workflow= on list_runs."""

from __future__ import annotations

from datetime import UTC, datetime

import wayline


@wayline.workflow(attributes={"team": "billing", "tier": 1})
async def orders(tenant: str) -> str:
    wayline.set_attributes(tenant=tenant, amount=1.5, due=datetime.now(UTC), tags=["a"])
    return tenant


async def find(client: wayline.Client) -> list[wayline.RunInfo]:
    await client.start_with(wayline.StartOptions(attributes={"region": "eu"}), orders, "acme")
    runs = await client.list_runs(where=["tenant=acme", "amount>1"], since="1h", workflow="orders")
    first: dict[str, object] = runs[0].search_attributes
    assert first
    return runs
