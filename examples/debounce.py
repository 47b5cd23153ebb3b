"""Debounce: a burst of saves of one document makes one reindex, with the last version.

    python examples/debounce.py

``@wayline.workflow(debounce=wayline.Debounce(key=lambda doc, version: doc, period="1s"))``:
a ``client.start`` that finds the document's run not yet begun returns that run's handle and
replaces its input; the run begins once a second passed with no further save, so the five
saves below make one run, which indexes version 5. Another document is a run of its own.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline

INDEXED: list[str] = []


@wayline.workflow(
    name="examples.reindex",
    debounce=wayline.Debounce(key=lambda doc, version: doc, period="1s"),
)
async def reindex(doc: str, version: int) -> str:
    INDEXED.append(f"{doc} v{version}")
    return f"indexed {doc} v{version}"


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [reindex]):
            client = wayline.Client(world)
            saves = [await client.start(reindex, "readme", v) for v in range(1, 6)]
            other = await client.start(reindex, "changelog", 1)
            assert len({h.run_id for h in saves}) == 1  # one run for the five saves
            for handle in [*saves, other]:
                await handle.result(timeout=60)
    return INDEXED


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
