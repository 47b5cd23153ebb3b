""".ci/run, CI's entry point, runs ``make test`` and ``make e2e`` and keeps its output in the
user's cache, the last five runs (757d172). Run here with a ``make`` of the test's own on the
PATH, which notes what it was asked and ends as told, and a cache folder of the test's own.

At c7f8641 a cache with no log in it yet (every CI machine's first run, and every run after:
the script ended before it made one) ended the script with status 2 before ``make`` ran:
``ls`` of a glob that matches nothing fails, and under ``set -o pipefail`` that failed the
pipeline that drops the old logs, which ``set -e`` ended the script on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CI_RUN = Path(__file__).resolve().parents[2] / ".ci" / "run"


def _run(tmp_path: Path, fail: str = "") -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    asked = tmp_path / "asked"
    make = bin_dir / "make"
    lines = [
        "#!/usr/bin/env bash",
        f'echo "$1" >> {asked}',
        'echo "make $1 ran"',
        f'[ "$1" != "{fail}" ]',  # ends as told: a failure for the target ``fail``
    ]
    make.write_text("\n".join(lines) + "\n")
    make.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        ["bash", str(CI_RUN)], env=env, capture_output=True, text=True, timeout=60
    )
    targets = asked.read_text().split() if asked.exists() else []
    asked.unlink(missing_ok=True)
    return done, targets


def _logs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "wayline" / "ci-logs").glob("*.log"))


def test_the_first_run_on_a_machine_runs_the_tests_and_keeps_its_log(tmp_path: Path) -> None:
    done, targets = _run(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert targets == ["test", "e2e"]
    (log,) = _logs(tmp_path)
    assert "make e2e ran" in log.read_text()


def test_a_failed_make_fails_the_run_and_its_log_is_kept(tmp_path: Path) -> None:
    done, targets = _run(tmp_path, fail="test")
    assert done.returncode != 0
    assert targets == ["test"]  # e2e is not run after a failed test
    (log,) = _logs(tmp_path)
    assert "make test ran" in log.read_text()


def test_the_last_five_logs_are_kept(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "wayline" / "ci-logs"
    folder.mkdir(parents=True)
    for i in range(7):
        old = folder / f"2000010{i}T000000Z-{i}.log"
        old.write_text("old\n")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    done, _ = _run(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    kept = _logs(tmp_path)
    assert len(kept) == 5
    assert [p.name for p in kept if p.read_text() == "old\n"] == [
        f"2000010{i}T000000Z-{i}.log" for i in range(3, 7)
    ]
