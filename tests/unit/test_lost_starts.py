"""Which pending runs with no start message a worker's look re-arms (``_engine.lost_starts``):
only those found so on the previous look too, under the same creation."""

from __future__ import annotations

from wayline._engine.lost_starts import due


def test_a_run_is_rearmed_on_its_second_look_only() -> None:
    now, later = due({}, {"a": 1.0})
    assert now == [] and later == {"a": 1.0}
    now, later = due(later, {"a": 1.0, "b": 2.0})
    assert now == ["a"] and later == {"b": 2.0}


def test_a_run_that_got_its_message_or_moved_is_forgotten() -> None:
    now, later = due({"a": 1.0, "b": 2.0}, {})
    assert now == [] and later == {}


def test_an_id_created_again_between_two_looks_starts_over() -> None:
    now, later = due({"a": 1.0}, {"a": 5.0})
    assert now == [] and later == {"a": 5.0}
