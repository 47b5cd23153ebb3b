"""Debounced workflows (``test_debounce``): every run writes ``ran TAG`` to a marker file, so
a test counts how many runs began and with which input."""

from __future__ import annotations

import wayline
from tests.runtime.flows import lines, mark


@wayline.workflow(
    name="debounce_flows.reindex",
    debounce=wayline.Debounce(key=lambda path, doc, version: doc, period="1s"),
)
async def reindex(path: str, doc: str, version: int) -> str:
    mark(path, f"ran {doc} {version}")
    return f"{doc}@{version}"


def ran(path: str) -> list[str]:
    return [line.removeprefix("ran ") for line in lines(path)]
