"""The CPU a replay takes to be fed a run's history, with no world and no event loop: a fresh
replay of a chain of no-op steps (``tests/runtime/flows.chain``) is fed its whole log, as a
worker does when it rebuilds a run's replay. Only the pure core runs, so the figure moves with
replay's own Python (``_apply``, ``_run``, the fibers) and nothing else.

    python bench/replay_feed.py [--steps 30] [--replays 300] [--rounds 5] [--tree FOLDER ...]

Each ``--tree`` is another checkout's ``runtime`` exported with ``git archive COMMIT runtime |
tar -x -C FOLDER`` (this tree's when none is given); the trees are measured in turn, one
child process each, round after round, and the least CPU microseconds an event of a round's
five repeats are printed per tree, so ratios are taken within a round.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(steps: int, replays: int) -> float:
    """The least CPU microseconds an event over five repeats, in this process's tree."""
    sys.path.insert(1, str(ROOT))
    from tests.runtime import flows
    from tests.unit.test_replay import Log, replay

    log, total = Log(steps), 0
    for i in range(steps):
        log.step(f"s{i + 1}", "add", total + i)
        total += i
    if not replay(flows.chain, log).finished:
        raise SystemExit("the history does not finish the run: the tree's replay differs")
    best = float("inf")
    for _ in range(5):
        began = time.process_time()
        for _ in range(replays):
            replay(flows.chain, log)
        spent = time.process_time() - began
        best = min(best, spent / replays / len(log.events) * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--replays", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="a folder holding runtime/")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        sys.path.insert(0, args.child)
        print(f"{measure(args.steps, args.replays):.3f}")
        return
    trees = [str(Path(t) / "runtime") for t in args.tree] or [str(ROOT / "runtime")]
    for n in range(args.rounds):
        figures = []
        for tree in trees:
            command = [sys.executable, __file__, "--child", tree]
            command += ["--steps", str(args.steps), "--replays", str(args.replays)]
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=True,
            )
            figures.append(f"{tree}: {done.stdout.strip()} us an event")
        print(f"round {n + 1}: " + "; ".join(figures), flush=True)


if __name__ == "__main__":
    main()
