"""``wayline runs pause`` and ``runs unpause`` on both worlds, in-process (no worker: the
run stays pending): what they print, the log's record of who paused and why, ``runs list
--status paused``, and the exit codes of docs/cli.md (1: nothing to do; a run that has ended
is not paused)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from wayline.cli import main


class _Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli_over_a_held_app(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    app: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., _Done]:
    """Write ``app``, an app of its own (one process registers a workflow name once) whose one
    workflow waits on a hook, work in its folder, and give a call of the CLI on ``world_url``
    that returns its exit code and what it printed."""
    app.write_text(
        "import wayline\n\n\n"
        "@wayline.workflow\n"
        f"async def held_{uuid.uuid4().hex[:12]}(ticket: str) -> object:\n"
        "    return await wayline.create_hook(ticket)\n"
    )
    monkeypatch.chdir(app.parent)
    capsys.readouterr()

    def cli(*argv: str) -> _Done:
        code = main([*argv, "--world", world_url])
        out, err = capsys.readouterr()
        return _Done(code, out, err)

    return cli


def test_pause_and_unpause_a_run(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = _cli_over_a_held_app(world_url, capsys, tmp_path / "pause_app.py", monkeypatch)

    def listed(status: str) -> list[dict[str, object]]:
        done = cli("runs", "list", "--status", status, "--json")
        assert done.returncode == 0, done.stderr
        found: list[dict[str, object]] = json.loads(done.stdout)
        return found

    started = cli("start", "pause_app.py", "--input", '"t-9"')
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()

    paused = cli("runs", "pause", run_id, "--reason", "provider outage")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"paused {run_id}: it starts nothing new")
    [row] = listed("paused")
    assert row["runId"] == run_id and row["status"] == "paused"
    shown = cli("runs", "show", run_id)
    assert "status    paused" in shown.stdout
    assert "paused    by client: provider outage" in shown.stdout
    assert "paused by client: provider outage" in shown.stdout.split("timeline", 1)[1]

    again = cli("runs", "pause", run_id)
    assert again.returncode == 1 and "already paused; nothing to pause" in again.stderr

    unpaused = cli("runs", "unpause", run_id, "--reason", "provider is back")
    assert unpaused.returncode == 0, unpaused.stderr
    assert unpaused.stdout.startswith(f"unpaused {run_id} (now pending)")
    assert "unpaused by client: provider is back" in cli("runs", "show", run_id).stdout
    assert listed("paused") == []
    not_paused = cli("runs", "unpause", run_id)
    assert not_paused.returncode == 1 and "is not paused (pending)" in not_paused.stderr

    assert cli("runs", "terminate", run_id).returncode == 0
    for verb in ("pause", "unpause"):
        ended = cli("runs", verb, run_id)
        assert ended.returncode == 1, (ended.stdout, ended.stderr)
        assert f"already ended (cancelled); nothing to {verb}" in ended.stderr
        assert "Traceback" not in ended.stderr


def test_pause_and_unpause_every_run_a_where_matches(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``runs pause --where`` holds every pending or running run whose search attributes
    match (``--dry-run`` names them and changes none), ``runs unpause --where`` lets the
    paused ones go; a where that matches nothing is nothing to do (1), and a RUN_ID with a
    where, or neither, is refused (2)."""
    cli = _cli_over_a_held_app(world_url, capsys, tmp_path / "bulk_app.py", monkeypatch)

    def start(tenant: str) -> str:
        done = cli("start", "bulk_app.py", "--input", '"t"', "--attr", f"tenant={tenant}")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    acme = {start("acme"), start("acme")}
    other = start("other")
    dry = cli("runs", "pause", "--where", "tenant=acme", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert {line.split()[2] for line in dry.stdout.splitlines()[:-1]} == acme
    assert json.loads(cli("runs", "list", "--status", "paused", "--json").stdout) == []

    paused = cli("runs", "pause", "--where", "tenant=acme", "--reason", "acme's outage")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.splitlines()[-1] == "paused 2 of 2 runs"
    listed = json.loads(cli("runs", "list", "--status", "paused", "--json").stdout)
    assert {row["runId"] for row in listed} == acme and other not in paused.stdout

    unpaused = cli("runs", "unpause", "--where", "tenant=acme")
    assert unpaused.returncode == 0, unpaused.stderr
    assert unpaused.stdout.splitlines()[-1] == "unpaused 2 of 2 runs"
    assert json.loads(cli("runs", "list", "--status", "paused", "--json").stdout) == []

    none = cli("runs", "pause", "--where", "tenant=nobody")
    assert none.returncode == 1 and "no run to pause matches --where tenant=nobody" in none.stderr
    both = cli("runs", "pause", other, "--where", "tenant=acme")
    assert both.returncode == 2 and "not both" in both.stderr
    neither = cli("runs", "pause")
    assert neither.returncode == 2 and "give a RUN_ID" in neither.stderr
