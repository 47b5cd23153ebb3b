"""Randomized interleavings of the connection's fast paths (``worlds/nats/wire.py``) against a
real nats-server: several tasks on one connection publish one-way, make requests answered
through a handed-off subscription, publish through nats-py itself, flush, and yield or not
between them, while another connection's messages are handed over by the reader at random
points (each of which ends the window in which a publish is held for the turn's send). Every
message must arrive exactly once and in each task's order, and every request must be
answered; a held publish left unsent shows as a missing message or a request that times out."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.nats_fixtures import NatsServer
from wayline.worlds.nats import wire

nats = pytest.importorskip("nats")


async def _subscribed(nc: Any) -> None:
    """The server has the connection's subscriptions: nats-py writes a SUB at the next turn,
    and ``flush`` writes its PING at once, so the PONG can come back before the SUB was sent."""
    await asyncio.sleep(0)
    await nc.flush()


_OPS = ("pub", "pub", "pub", "request", "nats_pub", "flush", "yield", "yield", "big")


async def _interleave(server: NatsServer, seed: int, tasks: int, ops: int) -> None:
    rng = random.Random(seed)
    prefix = f"wire.mix.{seed}"
    nc = await nats.connect(server.url)
    peer = await nats.connect(server.url)  # the responder, the collector and the noise
    try:
        got: dict[int, list[int]] = {t: [] for t in range(tasks)}

        async def collect(msg: Any) -> None:
            task, n = msg.data[:32].split(b":")[:2]
            got[int(task)].append(int(n))

        async def echo(msg: Any) -> None:
            await peer.publish(msg.reply, msg.data)

        await peer.subscribe(f"{prefix}.one", cb=collect)
        await peer.subscribe(f"{prefix}.ask", cb=echo)
        replies: dict[bytes, asyncio.Future[bytes]] = {}

        def answered(msg: Any) -> None:
            fut = replies.pop(msg.data, None)
            if fut is not None and not fut.done():
                fut.set_result(msg.data)

        noise_seen: list[bytes] = []
        await wire.subscribe(nc, f"{prefix}.reply", answered)
        await wire.subscribe(nc, f"{prefix}.noise", noise_seen.append)
        await _subscribed(peer)
        await _subscribed(nc)

        sent: dict[int, int] = {t: 0 for t in range(tasks)}
        plans = [[rng.choice(_OPS) for _ in range(ops)] for _ in range(tasks)]

        async def run(task: int) -> None:
            for op in plans[task]:
                if op in ("pub", "nats_pub", "big"):
                    body = f"{task}:{sent[task]}:".encode()
                    if op == "big":  # more than the transport buffers: drain pauses
                        body += b"x" * (nc.max_payload - 64)
                    sent[task] += 1
                    if op == "nats_pub":
                        await nc.publish(f"{prefix}.one", body)
                    else:
                        await wire.publish(nc, f"{prefix}.one", body)
                elif op == "request":
                    token = f"{task}:{rng.random()}".encode()
                    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
                    replies[token] = fut
                    await wire.publish(nc, f"{prefix}.ask", token, reply=f"{prefix}.reply")
                    assert await asyncio.wait_for(fut, 10) == token
                elif op == "flush":
                    await nc.flush(timeout=10)
                else:
                    await asyncio.sleep(0)

        async def noise() -> None:  # reader hand-overs at random points of the turns
            for i in range(ops * tasks // 2):
                await peer.publish(f"{prefix}.noise", str(i).encode())
                if rng.random() < 0.5:
                    await peer.flush()
                else:
                    await asyncio.sleep(0)

        await asyncio.wait_for(asyncio.gather(noise(), *(run(t) for t in range(tasks))), 60)
        # nothing else: the last publishes may be held for the turn's send, and only that
        # send (not a flush of ours) may take them out
        deadline = asyncio.get_running_loop().time() + 15
        while any(len(got[t]) < sent[t] for t in got):
            assert asyncio.get_running_loop().time() < deadline, (
                f"seed {seed}: missing {[(t, len(got[t]), sent[t]) for t in got]}"
            )
            await asyncio.sleep(0.01)
        await peer.flush()
        for t in got:
            assert got[t] == list(range(sent[t])), f"seed {seed}, task {t}"
        assert nc._pending == []
    finally:
        await nc.close()
        await peer.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    seed=st.integers(0, 2**32 - 1),
    tasks=st.integers(1, 6),
    ops=st.integers(1, 40),
)
def test_interleaved_publishes_requests_and_hand_overs_arrive_once_in_order(
    nats_server: NatsServer, seed: int, tasks: int, ops: int
) -> None:
    asyncio.run(_interleave(nats_server, seed, tasks, ops))


async def _collected(peer: Any, subject: str) -> list[bytes]:
    got: list[bytes] = []

    async def collect(msg: Any) -> None:
        got.append(msg.data)

    await peer.subscribe(subject, cb=collect)
    await _subscribed(peer)
    return got


async def _until_count(got: list[bytes], count: int) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while len(got) < count:
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(0.01)


async def test_a_lone_publish_after_an_unanswered_one_is_sent_without_a_flush(
    nats_server: NatsServer,
) -> None:
    """The publish held because the connection may still be in the turn of one written at
    once goes out at that turn's end, with no flush and nothing else on the connection."""
    nc = await nats.connect(nats_server.url)
    peer = await nats.connect(nats_server.url)
    try:
        got = await _collected(peer, "wire.mix.lone")
        for i in range(20):
            await wire.publish(nc, "wire.mix.lone", b"%d" % i)
            for _ in range(i % 3):
                await asyncio.sleep(0)
        await _until_count(got, 20)
        assert got == [b"%d" % i for i in range(20)]
    finally:
        await nc.close()
        await peer.close()


@pytest.mark.parametrize("ending", ["close", "drain", "flush"])
async def test_a_held_publish_goes_out_when_the_connection_ends_at_once(
    nats_server: NatsServer, ending: str
) -> None:
    """A publish held for the turn's send (the one before it written at once and unanswered)
    still reaches the server when the connection is closed, drained or flushed in that very
    turn, before the turn's send has run."""
    subject = f"wire.mix.end.{ending}"
    nc = await nats.connect(nats_server.url)
    peer = await nats.connect(nats_server.url)
    try:
        got = await _collected(peer, subject)
        await wire.publish(nc, subject, b"0")  # written at once
        await wire.publish(nc, subject, b"1")  # held for the turn's send
        assert len(nc._pending) == 1
        await getattr(nc, ending)()
        await _until_count(got, 2)
        assert got == [b"0", b"1"]
    finally:
        await nc.close()
        await peer.close()
