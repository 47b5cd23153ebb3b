"""What a JetStream atomic batch costs the server next to single publishes: the fsyncs and
directory operations it makes (counted with strace attached to the nats-server), and the wall
time of 100 messages as 100 concurrent acknowledged publishes and as concurrent batches of 10
and of 50 (without strace), alternating the order, on a
server with the default ``sync_interval`` and on one with ``sync_interval: always``.

    python bench/atomic_batches.py [--repeat 3]

Needs strace (``apt-get install strace``) and a kernel that lets this user trace its own
children. bench/RESULTS.md's "NATS appends gathered" section quotes its output.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

from nats_server import find_binary, free_port

from wayline.worlds.nats.direct import publish_acked, publish_batch

_CALLS = "fsync,fdatasync,mkdirat,renameat"


def _counts(lines: list[str]) -> dict[str, int]:
    return {
        "fsync": sum("fsync(" in line or "fdatasync(" in line for line in lines),
        "mkdir": sum("mkdirat(" in line for line in lines),
        "rename": sum("renameat(" in line for line in lines),
    }


@contextlib.contextmanager
def traced_server(sync: str | None) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """A throwaway nats-server with strace attached: its URL, the trace's file and the
    tracer (ended before the timings, which strace would slow)."""
    store = tempfile.mkdtemp(prefix="wayline-bench-batches-")
    conf = Path(store) / "nats.conf"
    extra = f', sync_interval: "{sync}"' if sync else ""
    conf.write_text(f'jetstream {{ store_dir: "{store}/js"{extra} }}\n')
    port = free_port()
    trace = Path(store) / "trace"
    server = subprocess.Popen(
        [find_binary(), "-a", "127.0.0.1", "-p", str(port), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-p", str(server.pid), "-e", f"trace={_CALLS}", "-o", str(trace)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"nats://127.0.0.1:{port}", trace, tracer
    finally:
        tracer.terminate()
        tracer.wait(timeout=20)
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(store, ignore_errors=True)


async def probe(sync: str | None, repeat: int) -> None:
    from nats.js.api import StreamConfig

    import nats

    name = sync or "default"
    with traced_server(sync) as (url, trace, tracer):
        await asyncio.sleep(1.5)
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(
            StreamConfig(name="B", subjects=["b.>"], allow_atomic=True, duplicate_window=120.0)
        )
        body = b"x" * 400

        def headers() -> dict[str, str]:
            return {"Nats-Expected-Last-Subject-Sequence": "0", "Nats-Msg-Id": uuid.uuid4().hex}

        async def singles(tag: str, n: int) -> None:
            await asyncio.gather(
                *(publish_acked(nc, f"b.{tag}.{i}", body, headers(), 10.0) for i in range(n))
            )

        async def batches(tag: str, n: int, size: int) -> None:
            await asyncio.gather(
                *(
                    publish_batch(
                        nc, [(f"b.{tag}.{j}.{i}", body, headers()) for i in range(size)], 10.0
                    )
                    for j in range(n // size)
                )
            )

        async def counted(what: str, call: Awaitable[None]) -> None:
            await asyncio.sleep(0.5)
            before = len(trace.read_text().splitlines())
            await call
            await asyncio.sleep(0.5)
            shown = _counts(trace.read_text().splitlines()[before:])
            print(f"{name}: {what}: {shown}", flush=True)

        await counted("100 concurrent single publishes", singles("c", 100))
        await counted("one atomic batch of 100", batches("b", 100, 100))
        await counted("one atomic batch of 10", batches("t", 10, 10))
        tracer.terminate()
        tracer.wait(timeout=20)
        shapes = [("singles", 1), ("batches of 10", 10), ("batches of 50", 50)]
        for rep in range(repeat):
            for kind, size in shapes if rep % 2 == 0 else shapes[::-1]:
                start = time.perf_counter()
                if size == 1:
                    await singles(f"s{rep}", 100)
                else:
                    await batches(f"g{rep}x{size}", 100, size)
                took = (time.perf_counter() - start) * 1000
                print(f"{name}: rep {rep + 1}: 100 messages as {kind}: {took:.1f} ms", flush=True)
        await nc.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for sync in (None, "always"):
        await probe(sync, args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
