"""The timelines the WorkflowWorker tests on real pods record: a row each time what they watch
(the versions, their replicas, the pinned runs, the backlog) changes, printed at the end of the
test and kept in a file (``E2E_TIMELINES``, default ``.wayline/e2e-timelines``), so a run's
timeline can be read after the cluster is gone and copied into docs/operator.md."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.clusters import ROOT, say

KEPT = Path(os.environ.get("E2E_TIMELINES", str(ROOT / ".wayline" / "e2e-timelines")))


@dataclass
class Timeline:
    """Rows of ``(seconds since the start, what was seen)``, one per change."""

    name: str
    started: float = field(default_factory=time.monotonic)
    rows: list[tuple[float, str]] = field(default_factory=list)

    def see(self, seen: str) -> None:
        if not self.rows or self.rows[-1][1] != seen:
            self.rows.append((round(time.monotonic() - self.started, 1), seen))

    def lines(self) -> list[str]:
        return [f"{t:6.1f}s  {seen}" for t, seen in self.rows]

    def keep(self) -> Path:
        """Prints the timeline and writes it to ``KEPT/<name>.txt``; returns that path."""
        KEPT.mkdir(parents=True, exist_ok=True)
        path = KEPT / f"{self.name}.txt"
        path.write_text("\n".join(self.lines()) + "\n")
        for line in self.lines():
            say(f"  {line}")
        say(f"  timeline kept in {path}")
        return path


def versions(rows: dict[str, dict[str, Any]], backlog: int | None = None) -> str:
    """One WorkflowWorker status as a timeline entry: each version's state, pinned runs,
    replicas wanted and ready, and the current version's backlog."""
    seen = "  ".join(
        f"{n} {r['state']} pinned={r.get('pinnedRuns') or 0} "
        f"replicas={r.get('replicas') or 0} ready={r.get('readyReplicas') or 0}"
        for n, r in sorted(rows.items())
    )
    return seen if backlog is None else f"{seen}  backlog={backlog}"
