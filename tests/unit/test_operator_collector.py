"""The operator's collector thresholds (``wayline_operator.collector``): tuned at start so a full
collection of a heap holding thousands of resources comes rarely."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wayline_operator import collector


@pytest.mark.skipif(not collector.GENERATIONAL, reason="3.14's collector has no generations")
def test_tune_makes_full_collections_rarer_than_cpythons_defaults() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        collector.tune()
        young, middle, old = gc.get_threshold()
        assert young >= 10 * 700  # a young pass every 10,000 allocations, not 700
        # a full collection is considered once per young*middle*old net allocations
        assert young * middle * old >= 100 * 700 * 10 * 10
    finally:
        gc.set_threshold(*before)


def test_the_operator_process_runs_with_the_tuned_thresholds(tmp_path: Path) -> None:
    """The operator's entry point tunes the collector before kopf starts: run in a child
    process with ``asyncio.run`` replaced by a probe that prints the thresholds instead of
    running kopf (with a kubeconfig naming a server never reached, as the entry point wants
    credentials before it starts kopf)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    code = (
        "import gc, sys\n"
        "from wayline_operator import __main__ as entry, collector\n"
        "import kopf, asyncio\n"
        "asyncio.run = lambda coro: (coro.close(), print(gc.get_threshold()))[0]\n"
        "entry.main(['--namespace', 'x'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    expected = collector.THRESHOLDS if collector.GENERATIONAL else gc.get_threshold()
    assert str(tuple(expected)) in done.stdout, done.stdout + done.stderr
