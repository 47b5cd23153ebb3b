"""``wayline runs export`` and ``wayline replay``: a code change checked against recorded runs,
with no world, before it is deployed."""

from __future__ import annotations

import json

from .conftest import Cli

APP = """
import wayline

@wayline.step
def add(a: int, b: int) -> int:
    return a + b

@wayline.workflow
async def total(n: int) -> int:
    s = 0
    for i in range(n):
        s = await add(s, i)
    return s
"""


def test_exported_runs_replay_and_a_divergent_change_exits_1(cli: Cli) -> None:
    (cli.cwd / "app.py").write_text(APP)
    assert cli.here("run", "app.py:total", "--input", "3").returncode == 0
    exported = cli.here("runs", "export")
    assert exported.returncode == 0, exported.stderr
    [history] = [json.loads(line) for line in exported.stdout.splitlines()]
    assert history["format"] == "wayline-history/1" and history["workflow"] == "total"
    (cli.cwd / "h.jsonl").write_text(exported.stdout)

    same = cli.here("replay", "--app", "app.py", "h.jsonl")
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines() == [
        f"{history['runId']} (total): ok",
        "replayed 1 history: 1 ok",
    ]

    (cli.cwd / "app.py").write_text(
        APP.replace("    return s", "    await wayline.sleep('1s')\n    return s")
    )
    changed = cli.here("replay", "--app", "app.py", "h.jsonl")
    assert changed.returncode == 1, changed.stderr
    assert "(total): diverged: replay divergence at seq" in changed.stdout
    assert "expected the run's end, got sleep" in changed.stdout


def test_export_by_id_and_bad_histories_are_refused_in_one_line(cli: Cli) -> None:
    (cli.cwd / "app.py").write_text(APP)
    assert cli.here("run", "app.py:total", "--input", "1").returncode == 0
    [run] = cli.json("runs", "list")
    one = cli.here("runs", "export", run["runId"])
    assert one.returncode == 0 and json.loads(one.stdout)["runId"] == run["runId"]

    (cli.cwd / "bad.jsonl").write_text(one.stdout + "{not json\n")
    bad = cli.here("replay", "--app", "app.py", "bad.jsonl")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bad.jsonl:2: not JSON"), bad.stderr
    empty = cli.here("runs", "export", "--status", "failed")
    assert empty.returncode == 1 and empty.stderr.startswith("error: no run to export")
