"""``wayline.any``: the first success among several durable awaitables (Promise.any).

    python examples/first_success.py

Ask three quote providers at once and take the first answer; a provider that fails is passed
over. When all fail, ``wayline.AllFailedError`` carries every error, in argument order.
``wayline.workflow_info()`` tells the workflow its run id, name, definition identity, start
time and the delivery attempt; ``step_context().started_at`` is when a step attempt began.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline

DOWN = {"slowpoke", "flaky"}


@wayline.step(name="examples.quote", max_retries=0)
async def quote(provider: str, amount: int) -> dict[str, object]:
    if provider in DOWN:
        raise ConnectionError(f"{provider} is down")
    started = wayline.step_context().started_at
    return {"provider": provider, "priceCents": amount * 110 // 100, "askedAt": str(started)}


@wayline.workflow(name="examples.best_effort_quote")
async def best_effort_quote(amount: int, providers: list[str]) -> dict[str, object]:
    info = wayline.workflow_info()
    try:
        answer = await wayline.any(*(quote(p, amount) for p in providers))
    except wayline.AllFailedError as err:
        answer = {"errors": [str(e) for e in err.errors]}
    return {"run": info.run_id, "workflow": info.workflow_name, **answer}


async def main() -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [best_effort_quote]):
            client = wayline.Client(world)
            one = await client.start(best_effort_quote, 100, ["slowpoke", "acme", "flaky"])
            none = await client.start(best_effort_quote, 100, ["slowpoke", "flaky"])
            return [await one.result(timeout=30), await none.result(timeout=30)]


if __name__ == "__main__":
    for out in asyncio.run(main()):
        print(out)
