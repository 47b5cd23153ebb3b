"""``wayline.settings`` is the only reader of the environment, the operator's knobs included."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from wayline.errors import ConfigurationError
from wayline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _environment_reads(path: Path) -> list[int]:
    """Lines that read ``os.environ`` (``.get``, ``[...]``, iteration) or call ``os.getenv``.

    A file whose text names neither ``environ`` nor ``getenv`` has no such attribute, so it is
    not parsed: the walk over every module of the runtime and the operator took 7 s alone
    (22 s under a loaded run) parsing and walking each file twice, for a handful that matter."""
    text = path.read_text()
    if "environ" not in text and "getenv" not in text:
        return []
    lines: list[int] = []
    writes = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
            lines.append(node.lineno)
        # ``os.environ[KEY] = value`` hands a value to child processes; it reads nothing.
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Subscript) and isinstance(t.ctx, ast.Store) for t in node.targets
        ):
            writes.add(node.lineno)
    return [line for line in lines if line not in writes]


def test_only_settings_reads_the_environment() -> None:
    sources = [*(ROOT / "runtime").rglob("*.py"), *(ROOT / "operator").rglob("*.py")]
    readers = {
        str(p.relative_to(ROOT)): found
        for p in sources
        if "__pycache__" not in p.parts and (found := _environment_reads(p))
    }
    assert set(readers) == {"runtime/wayline/settings.py"}, readers


def test_the_checker_sees_a_read(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\nx = os.environ.get('A')\nos.environ['B'] = 'b'\n")
    assert _environment_reads(source) == [2]


def test_operator_knobs_come_from_settings() -> None:
    env = {
        "WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS": "0.3",
        "WAYLINE_OPERATOR_SWEEP_SECONDS": "0.5",
        "WAYLINE_OPERATOR_HOOK_RETRY_SECONDS": "7",
        "WAYLINE_WORLD": "nats://127.0.0.1:4222",
    }
    settings = Settings.from_env(env)
    assert settings.operator_status_interval_seconds == 0.3
    assert settings.operator_sweep_seconds == 0.5
    assert settings.operator_hook_retry_seconds == 7.0
    assert settings.world_url == "nats://127.0.0.1:4222"
    defaults = Settings.from_env({})
    assert (defaults.operator_status_interval_seconds, defaults.operator_sweep_seconds) == (
        1.0,
        60.0,
    )
    assert defaults.operator_hook_retry_seconds == 5.0


@pytest.mark.parametrize("raw", ["soon", "0", "-1"])
def test_a_bad_operator_knob_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS"):
        Settings.from_env({"WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS": raw})


def test_the_nats_monitors_are_a_comma_separated_list() -> None:
    given = {"WAYLINE_NATS_MONITOR": " http://a:8222, ,http://b:8222 "}
    assert Settings.from_env(given).nats_monitors == ("http://a:8222", "http://b:8222")
    assert Settings.from_env({}).nats_monitors == ()


def test_the_held_delay_comes_from_the_environment_with_a_default_of_2s() -> None:
    assert Settings.from_env({}).held_delay_seconds == 2.0
    assert Settings().held_delay_seconds == 2.0
    assert Settings.from_env({"WAYLINE_HELD_DELAY_SECONDS": "0.2"}).held_delay_seconds == 0.2
    assert Settings.from_env({"WAYLINE_HELD_DELAY_SECONDS": "30"}).held_delay_seconds == 30.0


@pytest.mark.parametrize("raw", ["soon", "0", "-1", "30.5", "nan", "inf", "0.001", "0.099"])
def test_a_bad_held_delay_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ConfigurationError, match=f"WAYLINE_HELD_DELAY_SECONDS.*{raw!r}"):
        Settings.from_env({"WAYLINE_HELD_DELAY_SECONDS": raw})


@pytest.mark.parametrize("value", [0.0, -1.0, 31.0, float("nan"), 0.001, "2", None, True])
def test_settings_built_in_code_refuse_a_bad_held_delay(value: Any) -> None:
    """Under the 0.1 s floor a worker that cannot read a pause's age hands its held delivery
    back in a hot loop (bench/held_handbacks.py); a string or None is named, not a TypeError."""
    with pytest.raises(ConfigurationError, match=r"held_delay_seconds must be a number.*0\.1"):
        Settings(held_delay_seconds=value)


def test_the_held_delay_floor_and_an_int_are_taken() -> None:
    assert Settings(held_delay_seconds=0.1).held_delay_seconds == 0.1
    assert Settings(held_delay_seconds=3).held_delay_seconds == 3
    assert Settings.from_env({"WAYLINE_HELD_DELAY_SECONDS": "0.1"}).held_delay_seconds == 0.1


def test_the_prompt_wake_comes_from_the_environment_with_a_default_of_a_quarter_second() -> None:
    assert Settings.from_env({}).prompt_wake_seconds == 0.25
    assert Settings().prompt_wake_seconds == 0.25
    assert Settings.from_env({"WAYLINE_PROMPT_WAKE_SECONDS": "0"}).prompt_wake_seconds == 0.0
    assert Settings.from_env({"WAYLINE_PROMPT_WAKE_SECONDS": "5"}).prompt_wake_seconds == 5.0


@pytest.mark.parametrize("raw", ["soon", "-1", "5.5", "nan", "inf"])
def test_a_bad_prompt_wake_is_a_clear_error(raw: str) -> None:
    """Over 5 s a delivery would hold its worker slot for a long sleep; a negative or
    unreadable value is named with the variable, not taken for 0."""
    with pytest.raises(ConfigurationError, match="WAYLINE_PROMPT_WAKE_SECONDS"):
        Settings.from_env({"WAYLINE_PROMPT_WAKE_SECONDS": raw})


@pytest.mark.parametrize("value", [-0.1, 5.01, float("nan"), "0.25", None, True])
def test_settings_built_in_code_refuse_a_bad_prompt_wake(value: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"prompt_wake_seconds .*must be a number"):
        Settings(prompt_wake_seconds=value)
