"""Per-step concurrency limits: at most two renders per region at a time, across every worker.

    python examples/step_concurrency.py

``@wayline.step(concurrency=wayline.Limit(key=lambda region, job: region, max=2))``: the
step's delivery takes a slot of its key in the world before its attempt starts and gives it
back when the body ends (a worker killed mid-body holds it one lease more, 30 s by default).
A render that finds both slots of its region taken waits without spending an attempt, and its
run shows ``blocked`` with ``waitingFor: concurrency`` naming the step. Another region is not
held up, and the rest of each workflow (here: ``publish``) is not limited.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline

LOG: list[str] = []


@wayline.step(
    name="examples.render",
    concurrency=wayline.Limit(key=lambda region, job: region, max=2, lease="10s"),
)
async def render(region: str, job: str) -> str:
    LOG.append(f"render {region} {job}")
    await asyncio.sleep(0.1)  # the GPU takes a while
    LOG.append(f"rendered {region} {job}")
    return f"{region}/{job}.mp4"


@wayline.step(name="examples.publish")
async def publish(path: str) -> str:
    return f"https://cdn.example/{path}"


@wayline.workflow(name="render_and_publish")
async def render_and_publish(region: str, job: str) -> str:
    return await publish(await render(region, job))


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        other = wayline.LocalWorld(Path(tmp) / "wayline.db")  # a second worker, same world
        workers = (
            wayline.Worker(world, [render_and_publish]),
            wayline.Worker(other, [render_and_publish]),
        )
        async with world, other, workers[0], workers[1]:
            client = wayline.Client(world)
            handles = [
                await client.start(render_and_publish, "eu" if i < 5 else "us", f"j{i}")
                for i in range(7)
            ]
            for handle in handles:
                await handle.result(timeout=60)
    return LOG


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
