"""The NATS runs index's page order, from subject names alone (``runs_index.top``): newest
first, then by run id, past a cursor, with runs that share a time kept in run id order across
the page's edge."""

from __future__ import annotations

import random

from wayline._core.events import RunStatus
from wayline.worlds.nats.runs_index import time_token, top


def _subject(created: float, run_id: str, status: str = "pending") -> str:
    return f"wl.ri.{status}.order-wf.{time_token(created)}.{run_id}"


def test_pages_from_names_follow_the_order_of_the_runs_with_ties() -> None:
    rng = random.Random(5)
    runs = [(float(1_700_000_000 + rng.randrange(8)), f"wf_{i:04d}") for i in range(60)]
    subjects = [_subject(c, r, rng.choice(["pending", "failed"])) for c, r in runs]
    rng.shuffle(subjects)
    expected = [r for _, r in sorted(runs, key=lambda cr: (-cr[0], cr[1]))]
    walked: list[str] = []
    after: tuple[float, str] | None = None
    while True:
        page = top(subjects, after, 7)
        if not page:
            break
        walked += [e.run_id for e in page]
        after = (page[-1].created_at, page[-1].run_id)
    assert walked == expected
    assert {e.status for e in top(subjects, None, 60)} == {RunStatus.PENDING, RunStatus.FAILED}
