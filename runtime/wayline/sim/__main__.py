"""``python -m wayline.sim --seeds N [--first S]`` or ``--seed S`` (one seed, its trace).

Exit status 1 when any seed broke an invariant; each such seed is printed with what it broke
and the command that replays it."""

from __future__ import annotations

import argparse
import sys
import time

from .runner import run_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wayline.sim", description=__doc__)
    parser.add_argument("--seed", type=int, help="run this one seed and print its full trace")
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed of --seeds")
    args = parser.parse_args(argv)
    if args.seed is not None:
        outcome = run_seed(args.seed)
        sys.stdout.write(outcome.trace)
        for what in outcome.violations:
            print(f"seed {args.seed}: {what}")
        return 0 if outcome.ok else 1
    failed = 0
    began = time.process_time()
    for seed in range(args.first, args.first + args.seeds):
        outcome = run_seed(seed)
        if not outcome.ok:
            failed += 1
            print(f"seed {seed} FAILED: {outcome.violations[0]} (replay: make sim SEED={seed})")
    spent = time.process_time() - began
    rate = args.seeds / spent * 60 if spent > 0 else 0.0
    print(f"{args.seeds} seeds, {failed} failed, {spent:.1f}s of CPU, {rate:.0f} seeds a minute")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
