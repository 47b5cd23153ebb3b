"""The benchmarks start as the README runs them: `python bench/NAME.py` (bench/operator.py must
not shadow the standard library's `operator` for its neighbours)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(
    "script",
    [
        "steps.py",
        "steady.py",
        "soak.py",
        "operator.py",
        "attributes.py",
        "nats_cluster.py",
        "profile_steps.py",
        "replay_feed.py",
        "getpid_sites.py",
    ],
)
def test_a_bench_script_starts_from_its_path(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
