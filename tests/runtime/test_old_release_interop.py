"""A release from before the compiled codec (7c94dcc, whose SQLite world wrote ``json.dumps``
with spaces) and this one (compact JSON, orjson where installed) share one SQLite world: each
runs a workflow and reads the run the other wrote, with the same result and the same events.
A worker pod built from an old image and a CLI from a new one meet like this during an upgrade."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_all_components
from tests.runtime.old_release_proc import PAYLOAD
from tests.runtime.proc_runs import run_to_end

ROOT = Path(__file__).resolve().parents[2]
OLD = "7c94dcc"

pytestmark = pytest.mark.timeout(300)  # a hang guard on a loaded machine, not a timing


def _old_runtime(into: Path) -> Path:
    """The old release's ``runtime`` folder, from this repository's history: without it the
    test is skipped, or fails where every component is required (CI), as a skip there would
    hide a claim never checked."""
    try:
        archive = subprocess.run(
            ["git", "archive", OLD, "runtime"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        reason = f"the repository's history (commit {OLD}) is not here: {err}"
        if require_all_components():
            pytest.fail(f"{reason}; required because CI=true or WAYLINE_REQUIRE_ALL_COMPONENTS=1")
        pytest.skip(reason)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "runtime"


def _run(url: str, others: list[str], runtime: Path | None, codec: str) -> dict[str, Any]:
    env = {"WAYLINE_CODEC": codec}
    if runtime is not None:  # the old release's package comes before the installed one
        env["PYTHONPATH"] = str(runtime)
    out: dict[str, Any] = run_to_end("tests.runtime.old_release_proc", [url, *others], env, 240)
    return out


@pytest.mark.parametrize("codec", ["auto", "json"])
def test_an_old_release_and_this_one_read_each_others_sqlite_runs(
    tmp_path: Path, codec: str
) -> None:
    old = _old_runtime(tmp_path / "old")
    url = f"sqlite:///{tmp_path}/shared.db"
    expected = {**PAYLOAD, "text": PAYLOAD["text"] + "!!"}
    new_first = _run(url, [], None, codec)
    by_old = _run(url, [new_first["run_id"]], old, codec)
    by_new = _run(url, [new_first["run_id"], by_old["run_id"]], None, codec)
    assert Path(by_old["from"]).is_relative_to(old)  # the old release ran, not this one
    assert not Path(by_new["from"]).is_relative_to(old)
    assert new_first["result"] == by_old["result"] == by_new["result"] == expected
    assert by_old["read"][new_first["run_id"]]["result"] == expected
    assert by_new["read"][by_old["run_id"]]["result"] == expected
    # the old release folds what the new one wrote into the same events the new one reads
    events = by_new["read"][new_first["run_id"]]["events"]
    assert by_old["read"][new_first["run_id"]]["events"] == events
    types = [t for t, _ in events]
    assert [t for t, _ in by_new["read"][by_old["run_id"]]["events"]] == types
    assert types[-1] == "run_completed"


@pytest.mark.parametrize("required", ["1", ""])
def test_a_missing_old_release_fails_where_every_component_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, required: str
) -> None:
    monkeypatch.setenv("WAYLINE_REQUIRE_ALL_COMPONENTS", required)
    monkeypatch.delenv("CI", raising=False)
    absent = "0" * 40  # no repository holds this commit
    monkeypatch.setattr(sys.modules[__name__], "OLD", absent)
    try:
        _old_runtime(tmp_path / "old")
    except (pytest.fail.Exception, pytest.skip.Exception) as err:
        outcome, message = type(err).__name__, str(err)
    else:  # pragma: no cover - the archive of an absent commit cannot succeed
        raise AssertionError("git archive of an absent commit succeeded")
    assert outcome == ("Failed" if required else "Skipped"), message
    assert f"commit {absent}" in message
