"""The flows of the features added after the order workload: a rate-limited step, a debounced
workflow, a continue_as_new chain, and a run that fails once and is redriven and forked. Each
body reports to the seed's probe as the order's bodies do (:func:`~.workload.work`)."""

from __future__ import annotations

from typing import Any

from .. import Debounce, FatalError, RateLimit, continue_as_new, step, workflow
from .._core.definitions import WorkflowDefinition
from .._sdk.context import step_context
from .workload import Stage, work

PACE = RateLimit(rate="1/s", key="sim", burst=2)
"""One token a second, two at once: two runs of two calls each wait on it now and then."""
DEBOUNCE_SECONDS = 5.0
CHAIN_LENGTH = 3


@step(name="sim.paced", rate_limit=PACE, max_retries=3, retry_delay="1s")
async def paced(tag: str) -> str:
    await work("paced", fail=0.1)
    return tag


@workflow(name="sim.pacer")
async def pacer(tag: str) -> str:
    for i in range(2):
        await paced(f"{tag}.{i}")
    return tag


@step(name="sim.index", max_retries=3, retry_delay="1s")
async def index(version: str) -> str:
    await work("index")
    probe = Stage.probe
    assert probe is not None
    probe.indexed(step_context().run_id, version)
    return version


@workflow(
    name="sim.reindex",
    debounce=Debounce(key=lambda doc, version: doc, period=f"{DEBOUNCE_SECONDS:g}s"),
)
async def reindex(doc: str, version: str) -> str:
    return await index(version)


@step(name="sim.link", max_retries=3, retry_delay="1s")
async def link(n: int) -> int:
    await work("link")
    return n


@workflow(name="sim.chain")
async def chain(n: int) -> int:
    await link(n)
    if n < CHAIN_LENGTH:
        continue_as_new(n + 1)
    return n


@step(name="sim.prepare", max_retries=3, retry_delay="1s")
async def prepare(tag: str) -> str:
    await work("prepare")
    return tag


@step(name="sim.fragile", max_retries=0)
async def fragile(tag: str) -> str:
    await work("fragile")
    if tag in Stage.broken:
        raise FatalError(f"{tag} is broken until a client mends it (simulated)")
    return tag


@workflow(name="sim.repair")
async def repair(tag: str) -> str:
    await prepare(tag)
    await fragile(tag)
    await link(len(tag))
    return tag


WORKFLOWS: list[WorkflowDefinition[..., Any]] = [pacer, reindex, chain, repair]
RATES = {f"step:sim.paced:{PACE.key}": (PACE.per_second, PACE.capacity)}
"""The bucket of ``sim.paced`` (``step:<step name>:<key>``), its tokens a second and burst."""
