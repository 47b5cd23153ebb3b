"""A charge with a refund, then a step that writes the receipt to a stream: for the tests of a
step that dies after closing its stream, before its completion is recorded (tests/runtime and
tests/faults). Side effects are counted in files (see ``flows.mark``)."""

from __future__ import annotations

import wayline
from tests.runtime.flows import charge_card, mark


@wayline.step
async def write_receipt(path: str, order: str, lines: int) -> int:
    out = wayline.stream("receipt")
    attempt = wayline.step_context().attempt
    for i in range(lines):
        await out.write({"line": i, "attempt": attempt})
    mark(path, f"receipt {order} attempt {attempt}")
    return lines


@wayline.workflow
async def charge_then_receipt(path: str, order: str, lines: int) -> str:
    charged = await charge_card(path, order)
    written = await write_receipt(path, order, lines)
    return f"{charged}: {written} lines"
