"""The short chaos suite: each network fault once, on a small workload, against real
nats-servers and a real toxiproxy-server (``make chaos`` runs the long one and writes the
table in ``bench/RESULTS.md``). The black hole lasts 8 s here instead of the long suite's 30 s
so that each test stays well under a minute. Every run must complete within the bound after
the fault ends, none may be lost, and no step body may run again after the log recorded its
completion."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import network
from tests.chaos.cluster import RoutedCluster
from tests.chaos.workload import Figures
from tests.nats_fixtures import NatsServer, require_nats
from tests.toxiproxy import Toxiproxy

pytestmark = pytest.mark.slow

# 1 s bodies: a run of 6 steps is still in them when a 4 s fault ends
SHORT = {
    "latency": network.Shape(step_seconds=1.0, fault_seconds=4.0),
    "bandwidth": network.Shape(step_seconds=1.0, fault_seconds=4.0),
    "reset": network.Shape(step_seconds=1.0, fault_seconds=4.0),
    "blackhole": network.Shape(step_seconds=1.0, fault_seconds=8.0),
    "partition": network.Shape(step_seconds=1.0, fault_seconds=8.0),
}


@pytest.fixture
def routed_cluster(toxiproxy: Toxiproxy) -> Iterator[RoutedCluster]:
    binary = require_nats()
    with tempfile.TemporaryDirectory(prefix="wayline-chaos-") as tmp:
        cluster = RoutedCluster(binary, Path(tmp), toxiproxy)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


def _holds(figures: Figures, shape: network.Shape) -> None:
    print(figures)
    assert figures.started == shape.runs
    assert (figures.lost, figures.stuck, figures.reruns) == (0, 0, 0), figures
    assert figures.completed == shape.runs
    assert figures.all_complete <= shape.bound


@pytest.mark.parametrize("kind", ["latency", "bandwidth", "reset", "blackhole"])
async def test_a_poisoned_worker_link_loses_and_reruns_nothing(
    kind: str, nats_server: NatsServer, toxiproxy: Toxiproxy
) -> None:
    shape = SHORT[kind]
    _holds(await network.single_node(kind, nats_server.url, toxiproxy, shape), shape)


async def test_a_node_cut_from_its_peers_loses_and_reruns_nothing(
    routed_cluster: RoutedCluster,
) -> None:
    shape = SHORT["partition"]
    _holds(await network.partition(routed_cluster, shape), shape)
