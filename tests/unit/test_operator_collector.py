"""The operator's collector thresholds (``wayline_operator.collector``): tuned at start so a full
collection of a heap holding thousands of resources comes rarely."""

from __future__ import annotations

import gc

from wayline_operator import collector


def test_tune_raises_every_threshold_above_cpythons_defaults() -> None:
    before = gc.get_threshold()
    try:
        collector.tune()
        young, middle, old = gc.get_threshold()
        assert (young, middle, old) == collector.THRESHOLDS
        # a full collection is considered once per young*middle*old net allocations
        assert young * middle * old >= 100 * 700 * 10 * 10
    finally:
        gc.set_threshold(*before)
