"""The flow-control benchmark's workflow, importable by name so worker processes (``wayline
worker --app bench/flow_control_flows.py``) serve the runs ``bench/flow_control.py`` starts."""

from __future__ import annotations

import os
import time

import wayline

RATE = os.environ.get("WAYLINE_BENCH_RATE", "100/s")
"""The limit (``--rate`` of ``bench/flow_control.py`` sets it for the worker processes)."""


@wayline.step(
    name="bench.flow_control.limited",
    rate_limit=wayline.RateLimit(key=lambda round_tag, i: round_tag, rate=RATE),
)
async def limited(round_tag: str, i: int) -> float:
    return time.time()  # when the body started, which the token allowed


@wayline.workflow(name="bench.flow_control.chain")
async def chain(round_tag: str, steps: int) -> list[float]:
    return [await limited(round_tag, i) for i in range(steps)]


@wayline.workflow(
    name="bench.flow_control.debounced",
    debounce=wayline.Debounce(key=lambda tag, i: tag, period="2s"),
)
async def debounced(tag: str, i: int) -> int:
    return i
