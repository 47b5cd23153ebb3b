"""``LaneDrain`` adds up: a world of several partitions reports the drains of all its
queues as one (``NatsWorld.drain_lanes``)."""

from __future__ import annotations

from wayline.world.ports.queue import LaneDrain


def test_lane_drains_add_count_by_count() -> None:
    first = LaneDrain(moved=3, held=1, delayed=0)
    second = LaneDrain(moved=4, held=0, delayed=2)
    assert first + second == LaneDrain(moved=7, held=1, delayed=2)
    assert LaneDrain.total([first, second, second]) == LaneDrain(moved=11, held=1, delayed=4)
    assert LaneDrain.total([]) == LaneDrain(moved=0, held=0, delayed=0)
