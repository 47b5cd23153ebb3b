"""The CLI answers bad input with one ``error:`` line and exit 2, never a traceback: deep
nesting, integers past the interpreter's digit limit, and a Hypothesis pass over ``--input``,
``--world`` and ``hooks resume --payload``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wayline.cli import main


@pytest.fixture
def in_tmp(tmp_path: Path) -> Iterator[Path]:
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        # a workflow to start by file (a bare name needs a worker that registered it)
        (tmp_path / "app.py").write_text(
            "from typing import Any\n"
            "import wayline\n\n\n"
            "@wayline.workflow(name='wf')\n"
            "async def wf(*args: Any) -> None:\n"
            "    return None\n"
        )
        assert main(["start", "app.py:wf", "--world", "sqlite:///w.db"]) == 0  # the file exists
        yield tmp_path
    finally:
        os.chdir(here)


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    "text",
    ["[" * 50_000, "9" * 5000, '{"a": ' * 50_000, "[" * 900 + "]" * 900, '"\\ud800"x'],
    ids=["nested-50000", "digits-5000", "objects-50000", "nested-900", "junk-after"],
)
def test_hostile_input_exits_2_with_one_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    capsys.readouterr()
    assert main(["start", "app.py:wf", "--input", text, "--world", "sqlite:///w.db"]) == 2
    assert len(_one_line_error(capsys)) < 400  # the input is not echoed in full


def test_hostile_payload_and_world_exit_2(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert (
        main(["hooks", "resume", "t", "--payload", "[" * 50_000, "--world", "sqlite:///w.db"]) == 2
    )
    _one_line_error(capsys)
    assert main(["runs", "list", "--world", "nats://[::1"]) == 2
    _one_line_error(capsys)


JSONISH = st.one_of(
    st.text(max_size=60),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids),
        max_leaves=12,
    ).map(repr),
    st.builds(lambda n, c: c * n, st.integers(0, 3000), st.sampled_from(["[", "{", '{"a":', "9"])),
)
WORLDS = st.builds(
    lambda scheme, rest: scheme + rest,
    st.sampled_from(
        ["sqlite:///", "sqlite://", "", "foo://", "nats://[", "tls://[", "sqlite:////"]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(inp=JSONISH, world=WORLDS, payload=JSONISH)
def test_no_traceback_for_any_input_world_or_payload(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], inp: str, world: str, payload: str
) -> None:
    for argv in (
        ["start", "app.py:wf", "--input", inp, "--world", "sqlite:///w.db"],
        ["runs", "list", "--world", world],
        ["hooks", "resume", "tok", "--payload", payload, "--world", "sqlite:///w.db"],
    ):
        if "\x00" in "".join(argv):
            continue  # the OS refuses NUL in argv before wayline sees it
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's own refusals
            code = int(exit_.code or 0)
        out = capsys.readouterr()
        assert code in (0, 2), (argv, out.err)
        assert "Traceback" not in out.err


def test_an_oversized_input_exits_2_naming_size_and_limit(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAYLINE_MAX_INPUT_BYTES", "262144")  # the default is 64 MiB
    capsys.readouterr()
    big = '"' + "x" * (300 * 1024) + '"'
    assert main(["start", "app.py:wf", "--input", big, "--world", "sqlite:///w.db"]) == 2
    line = _one_line_error(capsys)
    assert "over the limit of 262144 bytes" in line and "WAYLINE_MAX_INPUT_BYTES" in line


def test_runs_show_list_and_repair_a_corrupt_run(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import sqlite3

    world = ["--world", "sqlite:///w.db"]
    capsys.readouterr()
    assert main(["start", "app.py:wf", *world]) == 0
    run_id = capsys.readouterr().out.strip()
    db = sqlite3.connect(in_tmp / "w.db")
    db.execute(
        "INSERT INTO events (run_id, seq, type, cid, data, created_at) VALUES (?,?,?,?,?,?)",
        (run_id, 2, "run_started", None, b"\xff\xfe", 0.0),
    )
    db.commit()
    db.close()
    assert main(["runs", "show", run_id, *world]) == 2
    shown = _one_line_error(capsys)
    assert "CORRUPT_LOG" in shown and "--drop-seq 2" in shown
    assert main(["runs", "show", run_id, "--json", *world]) == 2
    assert json.loads(capsys.readouterr().out)["status"] == "corrupt"
    assert main(["runs", "list", "--status", "corrupt", "--json", *world]) == 0
    assert [r["runId"] for r in json.loads(capsys.readouterr().out)] == [run_id]
    assert main(["runs", "cancel", run_id, *world]) == 2
    assert "unreadable" in _one_line_error(capsys)
    assert main(["runs", "repair", run_id, "--drop-seq", "1", *world]) == 2  # readable: refused
    _one_line_error(capsys)
    assert main(["runs", "repair", run_id, "--drop-seq", "2", *world]) == 0
    assert "removed event 2" in capsys.readouterr().out
    assert main(["runs", "show", run_id, "--json", *world]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "pending"


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "--app", "app.py", "--health-port", "99999"],
        ["worker", "--app", "app.py", "--health-port", "-1", "--processes", "1"],
        ["worker", "--app", "app.py", "--metrics-port", "70000", "--processes", "1"],
        ["worker", "--app", "app.py", "--shutdown-grace", "-1"],
        ["worker", "--app", "app.py", "--shutdown-grace", "nan"],
        ["runs", "cancel", "wf_" + "0" * 32, "--wait", "-1"],
    ],
    ids=["port-99999", "port-negative", "metrics-70000", "grace-negative", "grace-nan", "wait"],
)
def test_an_out_of_range_number_is_a_usage_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A port outside 0-65535 or a negative number of seconds is refused by the parser (exit
    2, the option named), before anything starts; a port out of range was a traceback."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--world", "sqlite:///w.db"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"argument {argv[3]}" in err, err


AT_FILE_COMMANDS = {
    "start": ["start", "app.py:wf", "--input"],
    "schedules-add": ["schedules", "add", "s", "--cron", "@hourly", "--workflow", "wf", "--input"],
    "hooks-resume": ["hooks", "resume", "t", "--payload"],
}
AT_FILE_CASES = {
    "missing": ("@missing.json", ["@missing.json: cannot read 'missing.json'", "No such file"]),
    "directory": ("@folder", ["@folder: cannot read 'folder'", "Is a directory"]),
    "no-path": ("@", ["@: no file named"]),
    "not-utf8": ("@latin1.json", ["@latin1.json: not UTF-8 text"]),
    "bad-json": ("@bad.json", ["@bad.json is not valid JSON", "at line 3 column 1"]),
    "bad-stdin": ("@-", ["@- is not valid JSON"]),
    "too-large": ("@big.json", ["@big.json: larger than 4096 bytes"]),
    "endless": ("@/dev/zero", ["@/dev/zero: larger than 4096 bytes"]),
}


@pytest.mark.parametrize("case", AT_FILE_CASES)
@pytest.mark.parametrize("command", AT_FILE_COMMANDS)
def test_an_unreadable_or_invalid_at_file_is_one_line_naming_option_and_path(
    in_tmp: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    case: str,
) -> None:
    """``--input @PATH`` / ``--payload @PATH``: a file that cannot be read, is larger than any
    payload a run takes (``/dev/zero`` too: it is not read whole), or whose text is not JSON,
    exits 2 with one line naming the option and the path; nothing is started or added."""
    import io
    import json

    (in_tmp / "folder").mkdir()
    (in_tmp / "latin1.json").write_bytes('"café"'.encode("latin-1"))
    (in_tmp / "bad.json").write_text('{"a": 1,\n "b": [2,\n')
    (in_tmp / "big.json").write_text(json.dumps(["x" * 500] * 10))
    # a file is read up to four times the larger payload limit, never whole
    monkeypatch.setenv("WAYLINE_MAX_INPUT_BYTES", "1024")
    monkeypatch.setenv("WAYLINE_MAX_HOOK_PAYLOAD_BYTES", "1024")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"{nope")))
    value, needles = AT_FILE_CASES[case]
    argv = [*AT_FILE_COMMANDS[command], value, "--world", "sqlite:///w.db"]
    option = argv[-4]
    capsys.readouterr()
    assert main(argv) == 2
    line = _one_line_error(capsys)
    assert line.startswith(f"error: {option} {value}"), line
    for needle in needles:
        assert needle in line, line
    assert main(["runs", "list", "--json", "--world", "sqlite:///w.db"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1  # the fixture's run alone
    assert not (in_tmp / ".wayline" / "schedules.json").exists()
