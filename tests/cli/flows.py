"""Small workflows the CLI tests drive through subprocesses (imported by the CLI, by path or
as ``flows`` from the test's working directory)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import wayline


@dataclass
class Greeting:
    name: str
    times: int = 1


@wayline.step(name="cli_tests.shout")
def shout(text: str) -> str:
    return text.upper()


@wayline.step(name="cli_tests.flaky", max_retries=2, retry_delay=0.05)
def flaky(n: int) -> int:
    if wayline.step_context().attempt < 2:
        raise RuntimeError("transient")
    return n * 2


@wayline.step(name="cli_tests.explode", max_retries=0)
def explode(reason: str) -> None:
    raise wayline.FatalError(reason)


@wayline.workflow
async def add(a: int, b: int) -> dict[str, int]:
    doubled = await flaky(a + b)
    return {"sum": a + b, "doubled": doubled}


@wayline.workflow(name="greet")
async def greet_workflow(greeting: Greeting) -> str:
    word = await shout(f"hello {greeting.name}")
    await wayline.sleep(0.05)
    return " ".join([word] * greeting.times)


@wayline.workflow
async def broken(reason: str) -> None:
    await explode(reason)


@wayline.workflow
async def approval(ticket: str) -> dict[str, object]:
    hook = wayline.create_hook(f"approve:{ticket}", timeout="10m")
    payload = await hook
    return {"ticket": ticket, "payload": payload}


def unhold(item: str, flag: str) -> None:
    """The compensation of ``hold``: fails while the file ``flag`` exists."""
    if Path(flag).exists():
        raise wayline.FatalError(f"cannot release {item}: warehouse offline")


@wayline.step(name="cli_tests.hold", max_retries=0, compensate=unhold)
def hold(item: str, flag: str) -> str:
    return f"held {item}"


@wayline.workflow
async def saga(item: str, flag: str) -> str:
    await hold(item, flag)
    await wayline.create_hook(f"saga:{item}")
    return "kept"


@wayline.step(name="cli_tests.linger", max_retries=1)
async def linger(seconds: float) -> float:
    """A step body that takes ``seconds``: long enough to kill its worker while it runs."""
    await asyncio.sleep(seconds)
    return seconds


@wayline.workflow
async def lingering(seconds: float) -> float:
    return await linger(seconds)
