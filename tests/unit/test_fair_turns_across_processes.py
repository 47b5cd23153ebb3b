"""The NATS world's fair turns with several receiving processes, each with its own fair clock
(``Levels.fair``), as pure logic: the real planner (``queue._plan``) and turn-taker
(``Levels.take_turns``) of each process, on lanes they share, taking one message at a time in
any interleaving of the processes. The claims are those of docs/nats.md, "Fair turns on
JetStream" (issue #38): behind another key's backlog a key's k-th message is taken at most
at the cluster's take 2k - 1 + N with N processes, and two backlogged keys of weights 1 and 3
share every prefix of the cluster's takes 1 to 3, to within one take per process."""

from __future__ import annotations

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from wayline.worlds.nats.levels import Levels
from wayline.worlds.nats.queue import _plan

Lanes = dict[str, collections.deque[tuple[float, int, str]]]
"""A level's lanes: each a deque of (store time, fairness weight, key) in stream order."""


def lanes_of(*keys: tuple[str, str, int, int, float]) -> Lanes:
    """Lanes filled with ``(lane, key, count, weight, first store time)``: one message a
    second from the first store time on."""
    lanes: Lanes = {}
    for lane, key, count, weight, at in keys:
        lanes[lane] = collections.deque((at + i, weight, key) for i in range(count))
    return lanes


def take_one(process: Levels, lanes: Lanes) -> str | None:
    """What one receive of a batch of one takes: the process plans the level's turns from the
    first message of each lane (as its direct gets read them), pulls in that order, and hands
    the pulled message out through its fair clock."""
    firsts = {c: (q[0][0], q[0][1]) for c, q in lanes.items() if q}
    if not firsts:
        return None
    for turns in _plan(firsts, process.fair, 1, now=1_000.0, aging=60.0):
        if lanes[turns.channel]:
            got = process.take_turns(
                5, [(turns.channel, turns.weight, [lanes[turns.channel].popleft()])]
            )
            return str(got[0][2])
    return None


def cluster_takes(processes: int, order: list[int], lanes: Lanes) -> list[str]:
    """The keys the cluster takes when processes take one message each in ``order`` (indices
    wrapped to the number of processes), until the lanes are empty or the order ends."""
    clocks = [Levels() for _ in range(processes)]
    taken: list[str] = []
    for i in order:
        key = take_one(clocks[i % processes], lanes)
        if key is None:
            break
        taken.append(key)
    return taken


interleavings = settings(max_examples=200, deadline=None)(
    given(processes=st.integers(1, 5), order=st.lists(st.integers(0, 4), min_size=80, max_size=80))
)
"""One to five processes taking 80 messages in any interleaving."""


@interleavings
def test_a_small_key_behind_a_backlog_gets_its_turns_across_processes(
    processes: int, order: list[int]
) -> None:
    lanes = lanes_of(("p5f0", "A", 60, 1, 0.0), ("p5f3", "B", 10, 1, 100.0))
    taken = cluster_takes(processes, order, lanes)
    positions = [i + 1 for i, key in enumerate(taken) if key == "B"]
    for k, position in enumerate(positions, start=1):
        assert position <= 2 * k - 1 + processes, (positions, taken)
    assert len(positions) == 10, taken  # all taken: the last by take 2 x 10 - 1 + 5 = 24


@interleavings
def test_weights_one_and_three_share_every_prefix_across_processes(
    processes: int, order: list[int]
) -> None:
    lanes = lanes_of(("p5f0", "light", 100, 1, 0.0), ("p5f1", "heavy", 100, 3, 50.0))
    taken = cluster_takes(processes, order, lanes)
    assert len(taken) == 80
    for length in range(1, len(taken) + 1):
        heavy = taken[:length].count("heavy")
        assert abs(heavy - 3 * length / 4) <= processes, (length, heavy, taken)
