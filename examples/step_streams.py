"""Durable streams from steps: a step reports progress while it works; anyone can follow it.

    python examples/step_streams.py
    wayline runs tail RUN_ID --stream progress --world URL   # the same, from another process
                                                             # (on a world both open; this
                                                             # example's is a temporary file)

``wayline.stream("progress")`` inside a step gives a writer; each ``await w.write(chunk)`` is
stored in the world before it returns (a subject per run and stream on NATS, a table on
SQLite). ``client.stream(run_id, "progress", start=0)`` reads in order from any index, follows
new chunks, and ends when the step settles. If an attempt fails and the step is retried, a
``restart`` chunk marks where the new attempt's output begins.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import wayline

FAILED_ONCE: set[str] = set()


@wayline.step(name="examples.transcode", retry=wayline.RetryPolicy(max_attempts=3, initial=0.01))
async def transcode(video: str) -> str:
    progress = wayline.stream("progress")
    for pct in (0, 25, 50, 75, 100):
        await progress.write({"video": video, "pct": pct})
        if pct == 50 and video not in FAILED_ONCE:  # the first attempt dies half-way
            FAILED_ONCE.add(video)
            raise ConnectionError("encoder lost")
    return f"{video}.mp4"


@wayline.workflow(name="examples.publish_video")
async def publish_video(video: str) -> str:
    published: str = await transcode(video)
    return published


async def main() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, [publish_video]):
            client = wayline.Client(world)
            handle = await client.start(publish_video, "cat")
            seen = []
            async for chunk in client.stream(handle.run_id, "progress"):
                if chunk.kind == "restart":
                    seen.append(f"-- attempt {chunk.attempt} starts over")
                else:
                    seen.append(f"{chunk.index}: {chunk.data['pct']}% (attempt {chunk.attempt})")
            seen.append(await handle.result(timeout=30))
            return seen


if __name__ == "__main__":
    for line in asyncio.run(main()):
        print(line)
