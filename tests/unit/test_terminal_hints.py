"""A world's memory of terminal hints: bounded, newest kept (pure bookkeeping, no server)."""

from __future__ import annotations

from wayline.world import seam


class _Hinted(seam.World):
    """Only the hint bookkeeping is exercised; the log and queue are never called."""


_Hinted.__abstractmethods__ = frozenset()


def test_a_world_remembers_a_bounded_number_of_ended_runs() -> None:
    world = _Hinted()
    for i in range(seam._HEARD_ENDED + 10):
        world._wake_terminal(f"r{i}")
    assert not world.heard_ended("r0")
    assert not world.heard_ended("r9")
    assert world.heard_ended("r10")
    assert world.heard_ended(f"r{seam._HEARD_ENDED + 9}")
    assert len(world._heard_ended) == seam._HEARD_ENDED


def test_a_hint_heard_again_is_kept_as_the_newest() -> None:
    world = _Hinted()
    world._wake_terminal("old")
    for i in range(seam._HEARD_ENDED - 1):
        world._wake_terminal(f"r{i}")
    world._wake_terminal("old")  # heard again: moves to the newest end
    world._wake_terminal("new")
    assert world.heard_ended("old")
    assert not world.heard_ended("r0")
