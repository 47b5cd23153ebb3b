"""One helper process run to its end: the codec, event-loop and old-release tests each start
``python -m <module> <url> <run ids...>`` under an environment of their own and read the
JSON line it prints last (what it ran and what it read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_to_end(module: str, args: list[str], env: Mapping[str, str], timeout: float) -> Any:
    """The last stdout line of ``python -m module *args`` (run from the repository's root
    with ``env`` over this process's environment), decoded; its stderr's end when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
