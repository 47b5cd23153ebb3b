"""A small workflow runs on each codec (the standard library's ``json``, or ``wayline[fast]``)
and each event loop (asyncio's, or uvloop), each in its own process since both are chosen
when the process starts, on SQLite and on NATS; and each process reads the runs that the
processes before it wrote on other codecs: the same results, the same events."""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer
from tests.runtime.codec_proc import PAYLOAD
from tests.runtime.proc_runs import run_to_end


def _installed(*modules: str) -> bool:
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


FAST = _installed("orjson", "msgspec")
UVLOOP = _installed("uvloop")

COMBINATIONS = [
    (codec, loop)
    for codec, loop in [
        ("json", "asyncio"),
        ("fast", "uvloop"),
        ("fast", "asyncio"),
        ("json", "uvloop"),
        ("json", "asyncio"),  # again: the standard library reads what the compiled codec wrote
    ]
    if (FAST or codec == "json") and (UVLOOP or loop == "asyncio")
]


def _run(url: str, codec: str, loop: str, others: list[str]) -> dict[str, Any]:
    env = {"WAYLINE_CODEC": codec, "WAYLINE_LOOP": loop}
    out: dict[str, Any] = run_to_end("tests.runtime.codec_proc", [url, *others], env, 120)
    return out


def _expected() -> dict[str, Any]:
    return {**PAYLOAD, "text": PAYLOAD["text"] + "!!"}


@pytest.fixture(params=["sqlite", "nats"])
def world_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/codecs.db"
    server: NatsServer = request.getfixturevalue("nats_server")
    return f"{server.url}?prefix=codec{uuid.uuid4().hex[:10]}"


def test_a_workflow_runs_on_each_codec_and_loop_and_each_reads_the_others(
    world_url: str,
) -> None:
    expected = _expected()
    written: dict[str, tuple[str, str]] = {}
    events: dict[str, list[Any]] = {}
    for codec, loop in COMBINATIONS:
        out = _run(world_url, codec, loop, list(written))
        assert out["codec"] == ("orjson+msgspec" if codec == "fast" else "json")
        assert out["loop"] == ("uvloop" if loop == "uvloop" else "asyncio.unix_events")
        assert out["result"] == expected
        for run_id, read in out["read"].items():
            assert read["result"] == expected, (written[run_id], codec)
            # every process reads a run's log alike, whichever codec wrote it or reads it
            assert events.setdefault(run_id, read["events"]) == read["events"]
            assert any(t == "run_completed" for t, _ in read["events"])
        written[out["run_id"]] = (codec, loop)
    assert len(events) == len(COMBINATIONS) - 1
