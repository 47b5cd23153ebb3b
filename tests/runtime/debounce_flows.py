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


@wayline.step(name="debounce_flows.write")
async def write(path: str, doc: str, version: int) -> str:
    mark(path, f"wrote {doc} {version}")
    return f"{doc}@{version}"


@wayline.workflow(
    name="debounce_flows.reindex_in_a_step",
    debounce=wayline.Debounce(key=lambda path, doc, version: doc, period="0.5s"),
)
async def reindex_in_a_step(path: str, doc: str, version: int) -> str:
    return await write(path, doc, version)


@wayline.workflow(
    name="debounce_flows.reindex_held",
    debounce=wayline.Debounce(key=lambda path, doc, token: doc, period="0.2s"),
)
async def reindex_held(path: str, doc: str, token: str) -> object:
    """Begins, marks it, then waits on hook ``token``: a run that began and lives on."""
    mark(path, f"ran {doc}")
    return await wayline.create_hook(token)
