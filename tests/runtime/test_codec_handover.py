"""A run started by a worker on one codec, whose worker is killed in the middle of a step, is
recovered and finished by a worker on the other codec (SQLite and NATS): the recovered worker
reads the step's input and the first step's recorded result that the other codec wrote, small
floats (which the two codecs spell differently) included, and the run ends with the same
value."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.nats_fixtures import NatsServer
from tests.runtime.codec_handover_proc import PAYLOAD

ROOT = Path(__file__).resolve().parents[2]
FAST = all(importlib.util.find_spec(m) is not None for m in ("orjson", "msgspec"))

pytestmark = pytest.mark.timeout(300)  # a hang guard on a loaded machine, not a timing


def _proc(url: str, marker: Path, codec: str, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WAYLINE_CODEC": codec, "CODEC_HANDOVER_MARKER": str(marker)}
    env["WAYLINE_VISIBILITY_SECONDS"] = "2"  # the dead worker's delivery comes back soon
    return subprocess.run(
        [sys.executable, "-m", "tests.runtime.codec_handover_proc", url, mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.skipif(not FAST, reason="wayline[fast] is not installed")
@pytest.mark.parametrize(("killed", "recovers"), [("json", "fast"), ("fast", "json")])
@pytest.mark.parametrize("world", ["sqlite", "nats"])
def test_a_run_killed_on_one_codec_is_finished_on_the_other(
    request: pytest.FixtureRequest, tmp_path: Path, killed: str, recovers: str, world: str
) -> None:
    url = f"sqlite:///{tmp_path}/handover.db"
    if world == "nats":
        server: NatsServer = request.getfixturevalue("nats_server")
        url = f"{server.url}?prefix=handover{uuid.uuid4().hex[:10]}"
    marker = tmp_path / f"{killed}-{recovers}"
    started = _proc(url, marker, killed, "start")
    assert started.returncode == 9, started.stderr[-3000:]  # killed in the second step
    assert marker.read_text() == ("json" if killed == "json" else "orjson+msgspec")
    resumed = _proc(url, marker, recovers, "resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    by = "json" if recovers == "json" else "orjson+msgspec"
    assert result == {**PAYLOAD, "steps": 2, "by": by}
    assert [repr(f) for f in result["floats"]] == [repr(f) for f in PAYLOAD["floats"]]
