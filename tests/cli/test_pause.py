"""``wayline runs pause`` and ``runs unpause`` on both worlds, in-process (no worker: the
run stays pending): what they print, the log's record of who paused and why, ``runs list
--status paused``, and the exit codes of docs/cli.md (1: nothing to do; a run that has ended
is not paused)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from wayline.cli import main


class _Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def test_pause_and_unpause_a_run(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an app of its own: one process registers a workflow name once
    (tmp_path / "pause_app.py").write_text(
        "import wayline\n\n\n"
        "@wayline.workflow\n"
        f"async def held_{uuid.uuid4().hex[:12]}(ticket: str) -> object:\n"
        "    return await wayline.create_hook(ticket)\n"
    )
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()

    def cli(*argv: str) -> _Done:
        code = main([*argv, "--world", world_url])
        out, err = capsys.readouterr()
        return _Done(code, out, err)

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
