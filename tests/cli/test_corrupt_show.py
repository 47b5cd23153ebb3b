"""A run with an unreadable entry in the middle of its log, on both worlds: ``Client.get_run``
raises ``CORRUPT_LOG`` (on SQLite too, where the run's row alone looks fine), and ``wayline runs
show`` says so in one line on stderr and exits 2, naming the repair."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.hostile.poison import is_local, poison_log
from wayline.client import Client
from wayline.errors import CorruptLogError
from wayline.world import open_world

from .conftest import FLOWS, Cli

pytestmark = pytest.mark.timeout(90)  # a hang guard on a loaded machine, not a timing


async def _poison_mid_log(url: str, run_id: str) -> int:
    """An unreadable entry, then a readable one after it: the damage is inside the log."""
    world = open_world(url)
    await world.start()
    try:
        bad = await poison_log(world, run_id, b"\xff\xfe", type_="run_started")
        after = json.dumps({} if is_local(world) else {"s": bad + 1, "e": [], "r": {}})
        await poison_log(world, run_id, after.encode(), type_="run_started", move_last=True)
        with pytest.raises(CorruptLogError) as raised:
            await Client(world).get_run(run_id)
        assert raised.value.code == "CORRUPT_LOG" and raised.value.seq == bad
        return bad
    finally:
        await world.close()


def test_runs_show_of_a_run_unreadable_mid_log_is_one_error_line(cli: Cli, world_url: str) -> None:
    started = cli.here("start", f"{FLOWS}:approval", "--input", '"t-7"')
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    bad = asyncio.run(_poison_mid_log(world_url, run_id))

    shown = cli.here("runs", "show", run_id)
    assert shown.returncode == 2, (shown.stdout, shown.stderr)
    assert shown.stdout == ""
    [line] = shown.stderr.splitlines()
    assert line.startswith(f"error: [CORRUPT_LOG] run {run_id}: "), line
    assert f" entry {bad} is unreadable " in line
    assert f"wayline runs repair {run_id} --drop-seq {bad}" in line
    as_json = cli.here("runs", "show", run_id, "--json")  # the same exit, with the fenced view
    assert as_json.returncode == 2, as_json.stderr
    assert json.loads(as_json.stdout)["status"] == "corrupt"
