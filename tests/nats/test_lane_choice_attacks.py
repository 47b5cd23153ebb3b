"""Attacks on the lane choice of keyed work on a real nats-server (issue #38): a lane read that
times out under a burst, fairness keys with odd characters, and two senders choosing for one
new key at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats.test_keys_sharing_a_lane import keyed, lanes_of
from tests.nats_fixtures import OpenWorlds, taken_names
from wayline.worlds.nats.names import FAIR_LANES, lane_of


async def test_a_burst_meeting_a_lane_read_that_times_out_reads_once(
    open_nats_world: OpenWorlds,
) -> None:
    """With direct gets unanswered (the stream's ``allow_direct`` off), a lane read waits out
    the request timeout. The sends of a burst that waited for that read go to their home lanes
    with it, instead of each reading the eight lanes again in turn (one timeout a send)."""
    world = await open_nats_world(request_timeout=0.3)
    queue = world._queue
    topic = "lane-read-times-out"
    reads: list[str] = []
    first = queue._lanes._first

    async def counted(topic: str, kind: str) -> Any:
        reads.append(kind)
        return await first(topic, kind)

    queue._lanes._first = counted
    config = (await queue._js.stream_info(queue._stream)).config
    config.allow_direct = False
    await queue._js.update_stream(config)
    try:
        keys = [f"timeout-key-{i}" for i in range(12)]
        await asyncio.gather(*(world.enqueue(topic, keyed(k, k)) for k in keys))
    finally:
        config.allow_direct = True
        await queue._js.update_stream(config)
    assert len(reads) == FAIR_LANES, f"{len(reads)} lane reads for one burst"
    assert await lanes_of(world, topic) == {k: {f"p5f{lane_of(k)}"} for k in keys}
    got = await taken_names(world, topic, len(keys), batch=12)
    assert sorted(got) == sorted(keys)


ODD_KEYS = [
    "tenant.with.dots",
    "wild*card>",
    "spaces and\ttabs",
    "ünïcödé-🙂",
    '{"fairnessKey": "json"}',
    "k" * 256,
]


async def test_fairness_keys_with_odd_characters_get_lanes_and_are_served(
    open_nats_world: OpenWorlds,
) -> None:
    """A fairness key is never a subject token (a lane is a number), so dots, wildcards,
    whitespace, non-ASCII text and the longest key allowed each get a lane of their own and
    their work is served once."""
    world = await open_nats_world()
    topic = "lane-odd-keys"
    for i, key in enumerate(ODD_KEYS):
        for r in range(2):
            await world.enqueue(topic, keyed(f"odd{i}/{r}", key, priority=4))
    lanes = await lanes_of(world, topic)
    assert set(lanes) == set(ODD_KEYS)
    assert all(len(used) == 1 for used in lanes.values()), lanes
    assert len({next(iter(used)) for used in lanes.values()}) == len(ODD_KEYS)
    got = await taken_names(world, topic, 2 * len(ODD_KEYS), batch=4)
    assert sorted(got) == sorted(f"odd{i}/{r}" for i in range(len(ODD_KEYS)) for r in range(2))


def test_a_fairness_key_that_is_not_utf8_text_is_refused_with_a_clear_error() -> None:
    """A lone surrogate cannot be encoded: the key's lane (a hash of its UTF-8 bytes) and its
    record on SQLite could not be made, so the start is refused before anything is written."""
    from wayline.start_options import StartOptions

    with pytest.raises(ValueError, match="fairness_key is text that encodes as UTF-8"):
        StartOptions(fairness_key="tenant-\ud800")


async def test_a_key_queued_behind_another_keeps_that_lane_when_one_frees(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past eight keys a key's work waits in its home lane behind another key's. When another
    lane then empties, the key's next work must not take it: it would be served before the
    key's earlier work, and a key's own work is first in, first out (docs/nats.md). The sends
    carry idempotency keys, as a client's starts do."""
    from wayline.worlds.nats import lane_choice

    monkeypatch.setattr(lane_choice, "CHOICE_SECONDS", 0.0)  # every send reads the lanes
    world = await open_nats_world()
    queue = world._queue
    topic = "lane-overflow-keeps-order"
    others = [f"fifo-other-{i}" for i in range(FAIR_LANES)]
    for key in others:
        await world.enqueue(topic, keyed(key, key, priority=6))
    assert len({next(iter(v)) for v in (await lanes_of(world, topic)).values()}) == FAIR_LANES
    late = "fifo-late-key"
    home = f"p6f{lane_of(late)}"
    await world.enqueue(topic, keyed("late/0", late, priority=6), idempotency_key="late-0")
    assert (await lanes_of(world, topic))[late] == {home}
    # another lane empties: its only message is taken and acked
    freed = [
        msg.seq
        async for msg, _ in queue.stored(queue._names.topic_wildcard(topic))
        if msg.subject.split(".")[2] != home
    ]
    await queue.remove_stored(freed[0])
    await world.enqueue(topic, keyed("late/1", late, priority=6), idempotency_key="late-1")
    assert (await lanes_of(world, topic))[late] == {home}


async def test_two_processes_sending_one_new_key_at_once_put_it_on_one_lane(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes (two worlds, each its own connection and lane choice) send a new key's
    work at once while another key holds its home lane: they read the same lanes and choose
    the same free lane, so the key's work is on one lane, first in, first out. Each process
    reads the level's eight lanes once for its whole burst, not once a send."""
    from wayline.worlds.nats import lane_choice

    monkeypatch.setattr(lane_choice, "CHOICE_SECONDS", 60.0)  # one view per process
    holder = await open_nats_world()
    senders = [await open_nats_world() for _ in range(3)]
    topic = "lane-two-processes-one-key"
    key = "two-process-key"
    other = next(f"squatter-{i}" for i in range(1000) if lane_of(f"squatter-{i}") == lane_of(key))
    await holder.enqueue(topic, keyed("squatter", other))
    reads = [0 for _ in senders]
    for i, world in enumerate(senders):
        first = world._queue._lanes._first

        async def counted(topic: str, kind: str, i: int = i, first: Any = first) -> Any:
            reads[i] += 1
            return await first(topic, kind)

        world._queue._lanes._first = counted
    await asyncio.gather(
        *(
            world.enqueue(topic, keyed(f"two/{i}/{r}", key), idempotency_key=f"two-{i}-{r}")
            for r in range(8)
            for i, world in enumerate(senders)
        )
    )
    lanes = await lanes_of(world=holder, topic=topic)
    assert lanes[key] == {f"p5f{(lane_of(key) + 1) % FAIR_LANES}"}, lanes
    assert reads == [FAIR_LANES] * len(senders)
    got = await taken_names(holder, topic, 1 + 8 * len(senders), batch=10)
    assert len(got) == len(set(got)) == 1 + 8 * len(senders)
