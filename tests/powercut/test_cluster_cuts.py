"""Power cuts under a 3-node NATS cluster keeping three replicas of every stream: all three
nodes at once, and one node while another is paused."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.powercut.harness import Figures, cut_once, kill
from tests.powercut.mount import LazyMount
from tests.powercut.stores import NatsStore

RUNS, STEPS, CUT_AFTER = 8, 40, 120
PAUSED_SECONDS = 3.0


async def _cut(
    sync_always: bool,
    lazy_mount: Callable[[str], LazyMount],
    tmp_path: Path,
    n: int,
    paused_cut: bool = False,
    gathered: bool = False,
) -> Figures:
    disks = [lazy_mount(f"t{n}n{i}") for i in range(3)]
    store = NatsStore([d.mount for d in disks], sync_always=sync_always)
    if gathered:  # concurrent runs' appends as atomic batches, from two a turn
        store.target += "&gather_appends=2"
    work = tmp_path / f"work{n}"
    work.mkdir()

    async def pause_one_cut_another(procs: list[subprocess.Popen[bytes]], acks: Path) -> None:
        # A follower of the event log is paused; the writes go on, acknowledged by the
        # leader and the other follower, whose power is then cut. The leader is left alone
        # with writes no other node kept, until the cut node restarts and the paused one
        # resumes (both in cut_once, after the workload is stopped).
        leader = store.leader("pc_events")
        followers = [node for node in store.nodes if node.name != leader]
        # The one fewer clients talk to is paused, so that the writes really go on.
        followers.sort(key=lambda n: (n.monitor("connz") or {}).get("num_connections", 0))
        paused, cut = followers
        paused.pause()
        try:
            # A client connected to the paused node hears nothing, so progress is not
            # waited for: the other clients' writes go on meanwhile.
            await asyncio.sleep(PAUSED_SECONDS)
        finally:
            kill(procs)
            cut.kill()
            disks[store.nodes.index(cut)].cut()
            paused.resume()

    figures = await cut_once(
        disks,
        store,
        work,
        runs=RUNS,
        steps=STEPS,
        cut_after=CUT_AFTER,
        fault=pause_one_cut_another if paused_cut else None,
    )
    store.kill()
    label = ("always" if sync_always else "default") + (" gathered" if gathered else "")
    print(f"cluster {label}{' paused+cut' if paused_cut else ''}: {figures.line()}")
    return figures


async def test_a_coordinated_cut_of_three_always_syncing_nodes_loses_nothing(
    lazy_mount: Callable[[str], LazyMount], tmp_path: Path
) -> None:
    figures = await _cut(True, lazy_mount, tmp_path, 0)
    assert figures.acked > CUT_AFTER
    assert figures.lost == []
    assert figures.rerun_after_acked == figures.rerun_after_recorded == figures.stuck == 0


async def test_a_coordinated_cut_of_three_always_syncing_nodes_gathering_loses_nothing(
    lazy_mount: Callable[[str], LazyMount], tmp_path: Path
) -> None:
    figures = await _cut(True, lazy_mount, tmp_path, 0, gathered=True)
    assert figures.acked > CUT_AFTER
    assert figures.lost == []
    assert figures.rerun_after_acked == figures.rerun_after_recorded == figures.stuck == 0
    print(f"cluster always gathered: {figures.batched} kept messages came in atomic batches")
    assert figures.batched > 0


async def test_a_coordinated_cut_of_three_default_nodes_loses_acknowledged_writes(
    lazy_mount: Callable[[str], LazyMount], tmp_path: Path
) -> None:
    figures = await _cut(False, lazy_mount, tmp_path, 0)
    assert figures.rerun_after_recorded == 0
    assert figures.lost


@pytest.mark.parametrize("sync_always", [True, False], ids=["always", "default"])
async def test_one_node_cut_while_another_is_paused(
    sync_always: bool, lazy_mount: Callable[[str], LazyMount], tmp_path: Path
) -> None:
    figures = await _cut(sync_always, lazy_mount, tmp_path, 0, paused_cut=True)
    assert figures.rerun_after_recorded == 0
    if sync_always:
        assert figures.lost == []
        assert figures.stuck == 0
