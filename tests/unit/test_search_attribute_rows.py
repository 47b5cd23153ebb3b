"""The index rows of a stored attribute value: bytes someone else wrote into a run's log
(an integer too large for a float, say) are shown, never searched, and never raise."""

from __future__ import annotations

from wayline._core.search_attributes import index_rows, matches, parse_where


def test_an_integer_no_writer_stores_has_no_rows_and_matches_nothing() -> None:
    huge = 10**400
    assert index_rows(huge) == []
    assert not matches([parse_where("amount>1")], {"amount": huge})


def test_the_largest_integer_a_writer_stores_is_indexed() -> None:
    assert index_rows(2**53) == [("num", float(2**53), None)]
