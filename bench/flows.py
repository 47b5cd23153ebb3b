"""The benchmark's workflow, importable by name so worker processes (``wayline worker --app
bench/flows.py``) serve the runs the benchmark starts."""

from __future__ import annotations

import wayline


@wayline.step(name="bench.noop")
async def bench_noop(i: int) -> int:
    return i


@wayline.workflow(name="bench.chain")
async def bench_chain(n: int) -> int:
    for i in range(n):
        await bench_noop(i)
    return n
