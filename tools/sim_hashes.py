"""The trace hash of each seed of a range, one ``seed hash`` line per seed, to check that a
change to the simulator's speed leaves every seed's history as it was.

Run it with the simulator of two commits and compare the outputs::

    git archive <old> runtime | tar -x -C /tmp/oldsim
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/oldsim/runtime .venv/bin/python tools/sim_hashes.py 0 300 > old
    PYTHONHASHSEED=0 .venv/bin/python tools/sim_hashes.py 0 300 > new
    cmp old new

or in one command, which extracts the commit's ``runtime`` into a temporary folder, hashes the
seeds with both simulators (each in a process with ``PYTHONHASHSEED=0``) and prints the seeds
whose histories differ, exiting 1 when there is one::

    .venv/bin/python tools/sim_hashes.py 0 200 --against 7c0454c

The hash covers the trace and the violations, so a seed that now fails (or no longer does)
differs too."""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seed_hash(seed: int) -> str:
    from wayline.sim.runner import run_seed

    outcome = run_seed(seed)
    digest = hashlib.sha256(outcome.trace.encode())
    for what in outcome.violations:
        digest.update(b"\0" + what.encode())
    return digest.hexdigest()


def hashes(first: int, count: int, runtime: Path | None) -> dict[int, str]:
    """Each seed's hash, from a fresh process whose simulator is ``runtime``'s (this
    checkout's when None)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if runtime is not None:
        env["PYTHONPATH"] = str(runtime)
    out = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).resolve()), str(first), str(count)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {int(seed): digest for seed, digest in (line.split() for line in out.splitlines())}


def against(rev: str, first: int, count: int) -> int:
    with tempfile.TemporaryDirectory(prefix="wayline-sim-hashes-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "runtime"], check=True, capture_output=True
        ).stdout
        path = Path(tmp, "runtime.tar")
        path.write_bytes(archive)
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        old = hashes(first, count, Path(tmp, "runtime"))
    new = hashes(first, count, None)
    moved = [seed for seed in sorted(new) if old.get(seed) != new[seed]]
    for seed in moved:
        print(f"seed {seed}: {old.get(seed)} at {rev}, {new[seed]} here")
    print(f"{len(moved)} of {count} seeds ({first}-{first + count - 1}) differ from {rev}")
    return 1 if moved else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("first", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--against", help="a commit whose simulator to compare with")
    args = parser.parse_args(argv)
    if args.against is not None:
        return against(args.against, args.first, args.count)
    for seed in range(args.first, args.first + args.count):
        print(seed, seed_hash(seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
