"""The trace hash of each seed of a range, one ``seed hash`` line per seed, to check that a
change to the simulator's speed leaves every seed's history as it was.

Run it with the simulator of two commits and compare the outputs::

    git archive <old> runtime | tar -x -C /tmp/oldsim
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/oldsim/runtime .venv/bin/python tools/sim_hashes.py 0 300 > old
    PYTHONHASHSEED=0 .venv/bin/python tools/sim_hashes.py 0 300 > new
    cmp old new

The hash covers the trace and the violations, so a seed that now fails (or no longer does)
differs too."""

from __future__ import annotations

import hashlib
import sys

from wayline.sim.runner import run_seed


def seed_hash(seed: int) -> str:
    outcome = run_seed(seed)
    digest = hashlib.sha256(outcome.trace.encode())
    for what in outcome.violations:
        digest.update(b"\0" + what.encode())
    return digest.hexdigest()


def main(argv: list[str]) -> None:
    first, count = int(argv[0]), int(argv[1])
    for seed in range(first, first + count):
        print(seed, seed_hash(seed), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
