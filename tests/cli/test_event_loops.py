"""``WAYLINE_LOOP`` chooses the event loop of a ``wayline`` command: asyncio's by default,
uvloop by name (``wayline[uvloop]``); an unknown name, or uvloop where it is not installed,
is refused with exit code 2 and one line saying why, before anything runs. docs/performance.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import FLOWS, Cli

pytestmark = pytest.mark.timeout(120)  # a hang guard on a loaded machine, not a timing


def _uvloop_installed() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _uvloop_installed(), reason="wayline[uvloop] is not installed")
def test_a_run_on_uvloop_gives_what_it_gives_on_asyncio(cli: Cli) -> None:
    for loop in ("uvloop", "asyncio"):
        done = cli("run", f"{FLOWS}:add", "--input", "[2, 3]", WAYLINE_LOOP=loop)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"sum": 5, "doubled": 10}


def test_an_unknown_loop_is_refused_before_anything_runs(cli: Cli) -> None:
    done = cli("run", f"{FLOWS}:add", "--input", "[2, 3]", WAYLINE_LOOP="tokio")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: WAYLINE_LOOP must be one of asyncio, uvloop")
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_uvloop_where_it_is_not_installed_says_what_to_install(cli: Cli, tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "uvloop.py").write_text("raise ImportError('hidden by the test')\n")
    done = cli(
        "run", f"{FLOWS}:add", "--input", "[2, 3]", WAYLINE_LOOP="uvloop", PYTHONPATH=str(hidden)
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'wayline[uvloop]'" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
