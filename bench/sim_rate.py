"""The simulator's seeds a minute of one core's CPU, for two simulators side by side.

    taskset -c 0 python -P bench/sim_rate.py --first 2000 --seeds 150 [--old /tmp/simold/runtime]
        [--rounds 3]

(``-P``: without it the script's own folder comes first on the path, and ``bench/operator.py``
shadows the standard library's ``operator`` before the script runs.)

Each round runs the seeds once with the simulator found at ``--old`` (a tree extracted with
``git archive <commit> runtime | tar -x -C /tmp/simold``) and once with this checkout's, one
after the other, each in a fresh process started with ``PYTHONHASHSEED=0`` (as ``make sim``);
the rate is the seeds over the process's CPU time (``time.process_time``), so it counts this
process's work only, though a loaded machine still slows it (caches, frequency). The ratio of
each round (new over old) is printed with the load average, since single figures on a shared
machine are noisy."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ONE = """
import sys
from wayline.sim.batches import run_range
batch = run_range(int(sys.argv[1]), int(sys.argv[2]))
print(batch.cpu_seconds, len(batch.failures))
"""


def rate(first: int, seeds: int, path: str | None) -> tuple[float, int]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if path is not None:
        env["PYTHONPATH"] = path
    out = subprocess.run(
        [sys.executable, "-c", ONE, str(first), str(seeds)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return seeds / float(out[0]) * 60, int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--first", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", default="/tmp/simold/runtime")
    args = parser.parse_args()
    if not Path(args.old, "wayline", "sim").is_dir():
        parser.error(f"--old {args.old} holds no wayline/sim: extract a commit's runtime there")
    for n in range(args.rounds):
        old, old_failed = rate(args.first, args.seeds, args.old)
        new, new_failed = rate(args.first, args.seeds, None)
        load = os.getloadavg()[0]
        print(
            f"round {n + 1}: old {old:.0f}/min ({old_failed} failed), new {new:.0f}/min"
            f" ({new_failed} failed), ratio {new / old:.2f}, load {load:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
