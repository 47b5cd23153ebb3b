"""How long a NATS console's runs model takes to load while page reads hold it back without
end (``RunsModel.paused``, bounded by ``HOLD_FREE`` and ``HOLD_SHARE``), against a load no read
holds back.

    python bench/runs_load_held.py [--runs 20000] [--rounds 3]

Fills one throwaway nats-server's world with ``--runs`` runs (as bench/console.py does), then,
``--rounds`` times, alternating the three ways, opens a fresh world (a console process starting
now), follows its runs and times the load: with no read, with two readers that read the first
page from the index's newest entries one call after another, their calls overlapping (two
consoles that each read their first page again as soon as it is answered), and with a read
always under way (the pause held throughout). The two readers are also timed with 12bbdf9's
pause (a window waits for as long as any read is under way), which ``--cap`` seconds end.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import contextlib
import os
import time
from typing import Any

import wayline
from wayline.worlds.nats.runs_model import RunsModel


async def _until_no_read(self: RunsModel) -> None:
    """12bbdf9's pause: a window waits for as long as any read is under way."""
    await self._clear.wait()


async def one_round(url: str, way: str, cap: float) -> dict[str, Any]:
    kept = RunsModel._reads_first
    if way.endswith("(12bbdf9)"):
        RunsModel._reads_first = _until_no_read  # type: ignore[method-assign]
    world = wayline.open_world(url)
    await world.start()
    pages = 0
    try:
        began = time.perf_counter()
        await world.follow_runs()
        model = world._listing.model  # type: ignore[attr-defined]
        stop = asyncio.Event()

        async def reader(delay: float) -> None:
            nonlocal pages
            await asyncio.sleep(delay)
            while not stop.is_set():
                await world.runs_page(after=None, limit=50)
                pages += 1

        readers = []
        async with contextlib.AsyncExitStack() as stack:
            if way == "held":
                await stack.enter_async_context(model.paused())
            if way.startswith("two readers"):
                readers = [asyncio.create_task(reader(d)) for d in (0.0, 0.05)]
            loaded = await world.runs_followed(cap) is not None
            loaded_s = time.perf_counter() - began
            stop.set()
            await asyncio.gather(*readers)
        shown = round(loaded_s, 2) if loaded else f"not loaded after {loaded_s:.0f}"
        return {"load s": shown, "pages read meanwhile": pages}
    finally:
        RunsModel._reads_first = kept  # type: ignore[method-assign]
        await world.close()


async def run(url: str, args: argparse.Namespace) -> None:
    from console import fill_url

    await fill_url(url, args.runs)
    for i in range(args.rounds):
        for way in ("no read", "two readers", "held", "two readers (12bbdf9)"):
            got = await one_round(url, way, args.cap)
            print(f"  round {i + 1}, {way}: {got}; load {os.getloadavg()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cap", type=float, default=60.0)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nats_server import machine, world_url

    print(machine(), flush=True)
    with world_url("nats", "runs-load-held") as url:
        asyncio.run(run(url, args))
    print(f"at the end: {machine()}")


if __name__ == "__main__":
    main()
