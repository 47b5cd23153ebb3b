"""How long a console's first runs calls take on NATS while its runs model loads: read from
the runs index's newest entries (now) or from a listing of every name of the index (at
5b33da8), at 100,000 runs.

    python bench/console_first_call.py [--runs 100000] [--rounds 3]

Fills one throwaway nats-server's world with ``--runs`` runs (as bench/console.py does), then,
``--rounds`` times, alternating the two ways, opens a fresh world (a console process starting
now: nothing in memory), and times its first ``GET /api/runs`` (a page of 50 and the counts),
the next page by its cursor, and how many calls it answers until the model is loaded. The
names' way is 5b33da8's code path: the tail is not asked (``_tail_page`` gives None) and the
counts are read from the names (``runs_loading`` says False).
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.endswith("bench")]

import argparse
import asyncio
import os
import time
from typing import Any

from wayline.worlds.nats.runs_listing import NatsRunsListing


async def _no_tail(self: Any, *args: Any) -> None:
    return None


def _not_loading(self: Any) -> bool:
    return False


async def one_round(url: str, names: bool) -> dict[str, Any]:
    kept = NatsRunsListing._tail_page, NatsRunsListing.runs_loading
    if names:
        NatsRunsListing._tail_page = _no_tail  # type: ignore[method-assign]
        NatsRunsListing.runs_loading = _not_loading  # type: ignore[method-assign]
    try:
        from console import console_at

        async with console_at(url) as (world, http):
            began = time.perf_counter()
            first = await http.get("/api/runs")
            first_s = time.perf_counter() - began
            if first.status_code != 200:  # the server too busy to answer: say so, go on
                return {"first call": first.status_code, "error": first.text[:160]}
            body = first.json()
            tail = world._listing._tail  # type: ignore[attr-defined]
            tail_read = 0 if tail is None else tail.top - tail.floor + 1
            model = world._listing.model  # type: ignore[attr-defined]
            loading_at_second = model is not None and not model.loaded
            began_second = time.perf_counter()
            second = await http.get("/api/runs", params={"cursor": body["nextCursor"]})
            second_s = time.perf_counter() - began_second
            assert second.status_code == 200, second.text
            answered = 2
            while model is not None and not model.loaded:
                answer = await http.get("/api/runs")
                answered += answer.status_code == 200
            loaded_s = time.perf_counter() - began
            settled = (await http.get("/api/runs")).json()
        assert [r["runId"] for r in settled["runs"]] == [r["runId"] for r in body["runs"]]
        return {
            "first call s": round(first_s, 3),
            "second page s": round(second_s, 3),
            "second while loading": loading_at_second,
            "counts partial": body.get("countsPartial", False),
            "tail entries read": tail_read,
            "model loaded s": round(loaded_s, 2),
            "answered": answered,
        }
    finally:
        NatsRunsListing._tail_page, NatsRunsListing.runs_loading = kept  # type: ignore[method-assign]


async def run(url: str, args: argparse.Namespace) -> None:
    from console import fill_url

    await fill_url(url, args.runs)
    for i in range(args.rounds):
        for names in (True, False):
            got = await one_round(url, names)
            way = "the index's names (5b33da8)" if names else "the index's newest entries (now)"
            print(f"  round {i + 1}, {way}: {got}; load {os.getloadavg()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nats_server import world_url

    print(f"{os.cpu_count()} cores; load average {os.getloadavg()}", flush=True)
    with world_url("nats", "console-first") as url:
        asyncio.run(run(url, args))
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
