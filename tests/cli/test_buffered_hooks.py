"""``wayline hooks resume TOKEN --buffer 10m`` on both worlds, in-process: a payload for a
token no hook holds yet is kept for the first hook a run creates for it, where without
``--buffer`` the command is refused (docs/day2.md, "Messages sent before the wait")."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from .conftest import InProcess, in_process

Run = InProcess


@pytest.fixture
def run(
    world_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> InProcess:
    """``run(*argv)`` in a directory holding an app whose one workflow waits on
    ``approve:TICKET``."""
    source = (
        "import wayline\n\n\n"
        "@wayline.workflow\n"
        f"async def approve_{uuid.uuid4().hex[:12]}(ticket: str) -> object:\n"
        '    return await wayline.create_hook(f"approve:{ticket}", timeout="10m")\n'
    )
    return in_process(world_url, capsys, tmp_path, monkeypatch, ("hook_app.py", source))


def test_hooks_resume_with_buffer_keeps_the_payload_for_the_hook_to_come(run: Run) -> None:
    resume = ["hooks", "resume", "approve:t-9", "--payload", '{"ok": true}']
    code, _, err = run("start", "hook_app.py", "--input", '"t-0"')  # the world exists now
    assert code == 0, err
    code, _, err = run(*resume)
    assert code == 2 and "no hook" in err
    code, out, err = run(*resume, "--buffer", "10m", "--delivery-id", "d-1")
    assert code == 0, err
    assert out.startswith("buffered a payload for hook approve:t-9 for 10m")
    code, _, err = run(*resume, "--buffer", "10m", "--delivery-id", "d-1")  # stored once
    assert code == 0, err
    code, _, err = run(*resume, "--buffer", "10m", "--delivery-id", "d-2")
    assert code == 2 and "buffered already" in err, err
    code, _, err = run(*resume, "--buffer", "soon")
    assert code == 2 and "--buffer" in err and "Traceback" not in err
    code, out, err = run("run", "hook_app.py", "--input", '"t-9"')
    assert code == 0, err
    assert json.loads(out) == {"ok": True}


def test_cleanup_sweeps_payloads_whose_buffer_expired(run: Run) -> None:
    code, _, err = run("start", "hook_app.py", "--input", '"t-0"')  # the world exists now
    assert code == 0, err
    resume = ["hooks", "resume", "approve:never", "--payload", "1", "--buffer", "1s"]
    code, _, err = run(*resume)
    assert code == 0, err
    time.sleep(1.2)  # the buffer's own duration: nothing shorter expires it
    code, out, err = run("cleanup", "--older-than", "1d")
    assert code == 0, err
    assert out.splitlines() == ["deleted 0 runs", "swept 1 expired hook payload"]
    code, out, _ = run("cleanup", "--older-than", "1d")
    assert out.splitlines() == ["deleted 0 runs"]
