"""``python -m wayline.sim --seeds N [--first S] [--jobs J]`` or ``--seed S`` (one seed, its
trace).

Exit status 1 when any seed broke an invariant; each such seed is printed with what it broke
and the command that replays it. ``--jobs J`` runs the seeds in J processes, each over a
range of its own, and prints one summary."""

from __future__ import annotations

import argparse
import sys
import time

from .batches import batches
from .runner import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wayline.sim", description=__doc__)
    parser.add_argument("--seed", type=int, help="run this one seed and print its full trace")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed of --seeds")
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes to run the seeds in (1: this one)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 0:
        parser.error(f"--seeds must be 0 or more, not {args.seeds}")
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    if args.seed is not None:
        outcome = run_seed(args.seed)
        sys.stdout.write(outcome.trace)
        for what in outcome.violations:
            print(f"seed {args.seed}: {what}")
        return 0 if outcome.ok else 1
    wall = time.monotonic()
    failed, spent = 0, 0.0
    for batch in batches(args.first, args.seeds, args.jobs):
        spent += batch.cpu_seconds
        for seed, what in batch.failures:
            failed += 1
            print(f"seed {seed} FAILED: {what} (replay: make sim SEED={seed})", flush=True)
    wall = time.monotonic() - wall
    rate = args.seeds / spent * 60 if spent > 0 else 0.0
    line = f"{args.seeds} seeds, {failed} failed, {spent:.1f}s of CPU, {rate:.0f} seeds a minute"
    if args.jobs > 1:
        line += f" of one core; {args.jobs} processes, {wall:.1f}s of wall time"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
