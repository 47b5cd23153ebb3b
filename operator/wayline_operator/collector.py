"""The cyclic garbage collector's thresholds for the operator process.

The operator keeps a record of every WorkflowRun it watches (kopf's and the mirror's), so its
heap grows with the resources: at 10,000 of them each full collection scans millions of
objects and stops the event loop for 0.3-0.75 s. With CPython's default thresholds
(700, 10, 10) one came every 7 s under load (``bench/operator.py``: 35 in 275 s, 16 s in
all), and each one delayed every status write waiting behind it. Nearly all of the operator's
garbage is acyclic (decoded JSON), which reference counting frees at once whatever the
thresholds; only cycles wait for a collection. So the young generation is collected every
10,000 allocations instead of 700 (each pass scans at most that many objects), and a full
collection is considered every 100 middle ones (10 million net allocations) instead of 10:
the long pauses become rare, and a cycle that reaches the old generation lives a while longer.

CPython 3.14's incremental collector has no such generations (it reads the third threshold
as 0): there the defaults are kept.
"""

from __future__ import annotations

import gc
import sys

THRESHOLDS = (10_000, 10, 100)
GENERATIONAL = sys.version_info < (3, 14)


def tune() -> None:
    if GENERATIONAL:
        gc.set_threshold(*THRESHOLDS)
