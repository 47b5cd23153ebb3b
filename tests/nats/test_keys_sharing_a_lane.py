"""Two fairness keys whose hashes pick one lane get fair turns between them on NATS: a key's
work goes to a lane its own while its level has one free (``lane_choice``), so tenant B's few
runs are not first in, first out behind tenant A's backlog in A's lane. A key keeps its lane
while its work is queued there, and more keys than lanes share lanes without losing or
repeating a message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.nats_fixtures import OpenWorlds, taken_names
from wayline._core import ordering
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import lane_choice
from wayline.worlds.nats.codec import dumps
from wayline.worlds.nats.direct import StoredMsg
from wayline.worlds.nats.lane_choice import choose, key_of
from wayline.worlds.nats.names import FAIR_LANES, lane_of

A_KEY, B_KEY = "A", "B12"
"""Two keys of one lane (lane 0), so the hash alone would queue B's work behind A's."""


def keyed(name: str, key: str, priority: int = ordering.DEFAULT_PRIORITY) -> dict[str, Any]:
    return {"name": name, **ordering.Ordering(priority, key, 1).fields()}


async def lanes_of(world: Any, topic: str) -> dict[str, set[str]]:
    """The subject token (``p<level>f<lane>``) of the stored messages of each key on
    ``topic``."""
    out: dict[str, set[str]] = {}
    async for msg, payload in world._queue.stored(world._queue._names.topic_wildcard(topic)):
        key = ordering.of_payload(payload).fairness_key
        out.setdefault(key, set()).add(msg.subject.split(".")[2])
    return out


async def test_a_key_behind_a_backlog_in_its_hash_lane_gets_its_turn_at_once(
    open_nats_world: OpenWorlds,
) -> None:
    """30 messages of A, then 3 of B, keys whose hashes pick one lane: B's are taken within
    the first six, one receive at a time, at the default priority and at priority 7 (at
    7c0517b's fair lanes they were 31st to 33rd)."""
    assert lane_of(A_KEY) == lane_of(B_KEY)
    world = await open_nats_world()
    for priority in (ordering.DEFAULT_PRIORITY, 7):
        topic = f"lane-mates-backlog-p{priority}"
        for i in range(30):
            await world.enqueue(topic, keyed(f"a{i}", A_KEY, priority))
        for i in range(3):
            await world.enqueue(topic, keyed(f"b{i}", B_KEY, priority))
        got = await taken_names(world, topic, 6, batch=1)
        assert sorted(n for n in got if n.startswith("b")) == ["b0", "b1", "b2"], got
        assert [n for n in got if n.startswith("a")] == ["a0", "a1", "a2"]
        rest = await taken_names(world, topic, 27, batch=10)
        assert rest == [f"a{i}" for i in range(3, 30)]


async def test_a_sender_in_another_process_sees_the_lane_taken(
    open_nats_world: OpenWorlds,
) -> None:
    """The lanes' holders are read from the stream, not remembered by one process: A's backlog
    sent by one world, B's work by another (a client elsewhere), B's still goes to a free lane
    and is taken within the first six by a third."""
    sender_a, sender_b, worker = [await open_nats_world() for _ in range(3)]
    topic = "lane-mates-two-senders"
    for i in range(30):
        await sender_a.enqueue(topic, keyed(f"a{i}", A_KEY))
    for i in range(3):
        await sender_b.enqueue(topic, keyed(f"b{i}", B_KEY))
    got = await taken_names(worker, topic, 6, batch=1)
    assert sorted(n for n in got if n.startswith("b")) == ["b0", "b1", "b2"], got
    assert len(await taken_names(worker, topic, 27, batch=10)) == 27


async def test_a_key_keeps_the_lane_its_queued_work_is_on(
    open_nats_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's work, sent to the next free lane because A's work holds B's hash lane, stays there
    for every later send while it is queued (one lane a key: its own work first in, first
    out), even once A's lane is empty again."""
    monkeypatch.setattr(lane_choice, "CHOICE_SECONDS", 0.0)  # every send asks again
    world = await open_nats_world()
    topic = "lane-mates-sticky"
    await world.enqueue(topic, keyed("a0", A_KEY))
    await world.enqueue(topic, keyed("b0", B_KEY))
    assert sorted(await taken_names(world, topic, 2, batch=2)) == ["a0", "b0"]
    # both lanes are empty now: A's next send goes home, B's finds A's work there and goes to
    # the next free lane
    await world.enqueue(topic, keyed("a1", A_KEY))
    await world.enqueue(topic, keyed("b1", B_KEY))
    # A's lane empties (its message removed): B's later sends still follow b1, not go home
    async for msg, payload in world._queue.stored(world._queue._names.topic_wildcard(topic)):
        if payload.get("name") == "a1":
            await world._queue.remove_stored(msg.seq)
    for i in range(2, 6):
        await world.enqueue(topic, keyed(f"b{i}", B_KEY))
    lanes = await lanes_of(world, topic)
    assert A_KEY not in lanes
    assert lanes[B_KEY] == {f"p5f{(lane_of(B_KEY) + 1) % FAIR_LANES}"}, lanes
    assert await taken_names(world, topic, 5, batch=1) == [f"b{i}" for i in range(1, 6)]


async def test_more_keys_than_lanes_share_lanes_and_lose_nothing(
    open_nats_world: OpenWorlds,
) -> None:
    """Twelve keys at one level of eight lanes: every lane is used, the keys past the eighth
    share, and each of the 36 messages is taken exactly once."""
    world = await open_nats_world()
    topic = "lane-mates-crowded"
    keys = [f"crowd-{i}" for i in range(12)]
    for round_ in range(3):
        for key in keys:
            await world.enqueue(topic, keyed(f"{key}/{round_}", key, priority=3))
    lanes = await lanes_of(world, topic)
    used = set().union(*lanes.values())
    assert used == {f"p3f{lane}" for lane in range(FAIR_LANES)}, lanes
    got = await taken_names(world, topic, 36, batch=7)
    assert sorted(got) == sorted(f"{k}/{r}" for k in keys for r in range(3))
    assert await world.receive(topic, max_messages=5, wait_seconds=0.3) == []


def test_the_choice_prefers_the_keys_own_lane_then_a_free_one_then_home() -> None:
    home = lane_of(B_KEY)
    others: list[str | None] = [f"other-{i}" for i in range(FAIR_LANES)]
    assert choose(B_KEY, [None] * FAIR_LANES) == home
    taken_home: list[str | None] = [None] * FAIR_LANES
    taken_home[home] = "other"
    assert choose(B_KEY, taken_home) == (home + 1) % FAIR_LANES
    mine_far = list(others)
    mine_far[(home + 5) % FAIR_LANES] = B_KEY
    assert choose(B_KEY, mine_far) == (home + 5) % FAIR_LANES
    assert choose(B_KEY, others) == home


def test_a_lanes_holder_is_the_key_of_its_first_message() -> None:
    assert key_of(None) is None
    assert key_of(StoredMsg("x.q.p5f0.t.m", 1, dumps(keyed("m", B_KEY)), {})) == B_KEY
    assert key_of(StoredMsg("x.q.p5f0.t.m", 1, b"\xff not json", {})) == ""
    assert key_of(StoredMsg("x.q.p5f0.t.m", 1, b"[1]", {})) == ""


async def test_a_burst_of_sends_reads_the_lanes_once() -> None:
    """A hundred sends at once, of a hundred keys, ask each of the level's eight lanes once
    (one read for the burst, not one a send), and the first eight keys get eight lanes."""
    asked: list[str] = []

    async def first(topic: str, kind: str) -> StoredMsg | None:
        asked.append(kind)
        await asyncio.sleep(0.01)  # the direct get's round trip: the others wait for it
        return None

    choice = lane_choice.LaneChoice(first)
    kinds = await asyncio.gather(*(choice.kind("burst", 5, f"burst-{i}") for i in range(100)))
    assert sorted(asked) == sorted(f"p5f{lane}" for lane in range(FAIR_LANES))
    assert len(set(kinds[:FAIR_LANES])) == FAIR_LANES


async def test_a_send_that_cannot_read_the_lanes_goes_to_the_keys_home_lane() -> None:
    """The lanes' read is a hint: when it fails (a server electing its leader), the send goes
    to the key's home lane, as before the choice, and the next send reads again."""
    calls: list[str] = []

    async def first(topic: str, kind: str) -> StoredMsg | None:
        calls.append(kind)
        if len(calls) <= FAIR_LANES:
            raise WorldUnavailableError("no JetStream answer")
        return None

    choice = lane_choice.LaneChoice(first)
    assert await choice.kind("unread", 5, B_KEY) == f"p5f{lane_of(B_KEY)}"
    assert await choice.kind("unread", 5, "other") == f"p5f{lane_of('other')}"
    assert len(calls) > FAIR_LANES  # read again, not a failure remembered
