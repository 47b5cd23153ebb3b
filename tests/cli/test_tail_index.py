"""``wayline runs tail --show-index`` prints the index ``--start`` takes, on both worlds; without
the flag each line stays one JSON value, as scripts read it."""

from __future__ import annotations

import json

import pytest

from .conftest import FLOWS, Cli

SDK_FLOWS = FLOWS.with_name("sdk_flows.py")

pytestmark = pytest.mark.timeout(90)  # a hang guard on a loaded machine, not a timing


def test_runs_tail_shows_each_records_index_under_a_flag(cli: Cli, world_url: str) -> None:
    done = cli.here("run", f"{SDK_FLOWS}:counting_twice", "--input", "2")
    assert done.returncode == 0, done.stderr
    [run] = cli.json("runs", "list")
    tail = ["runs", "tail", run["runId"], "--stream", "progress", "--no-follow"]

    plain = cli.here(*tail)
    assert plain.returncode == 0, plain.stderr
    assert [json.loads(line)["done"] for line in plain.stdout.splitlines()] == [1, 2, 1, 2]

    indexed = cli.here(*tail, "--show-index")
    assert indexed.returncode == 0, indexed.stderr
    rows = [line.split("\t", 1) for line in indexed.stdout.splitlines()]
    assert [(int(i), json.loads(data)["attempt"]) for i, data in rows] == [
        (0, 1),
        (1, 1),
        (3, 2),
        (4, 2),
    ]
    assert indexed.stderr.startswith("2\t# step ")  # the restart record has an index too
    assert "restarted (attempt 2)" in indexed.stderr

    last = cli.here(*tail, "--show-index", "--start", "4")
    assert last.stdout.splitlines() == ['4\t{"done": 2, "attempt": 2}']
