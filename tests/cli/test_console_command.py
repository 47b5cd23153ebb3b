"""``wayline console`` as a process: it serves the API on the port it prints, acts with the
token of --token-file, and exits 0 on SIGTERM; a token file it cannot use is bad input (exit
2, one line) before anything is served."""

from __future__ import annotations

import re
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import FLOWS, Background, Cli
from tests.nats_fixtures import NatsServer
from wayline.cli import main


def test_the_console_serves_the_world_and_stops_on_sigterm(
    cli: Cli, world_url: str, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    started = cli.here("start", f"{FLOWS}:add", "--input", "[1, 2]")  # no worker: it waits
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    token = tmp_path / "token"
    token.write_text("a-console-token-of-some-length\n")
    console = spawn("console", "--port", "0", "--token-file", str(token))
    said = console.wait_for("wayline console on http://")
    found = re.search(r"http://127\.0\.0\.1:(\d+)/ \(actions need the token\)", said)
    assert found is not None, said
    base = f"http://127.0.0.1:{found.group(1)}"
    with httpx.Client(base_url=base, timeout=10) as http:
        assert [r["runId"] for r in http.get("/api/runs").json()["runs"]] == [run_id]
        assert "Wayline" in http.get("/").text
        auth = {"Authorization": "Bearer a-console-token-of-some-length"}
        cancelled = http.post(f"/api/runs/{run_id}/cancel", headers=auth)
        assert cancelled.json() == {"runId": run_id, "cancelled": True}
    assert console.stop(signal.SIGTERM) == 0


def test_a_console_for_a_pod_hides_the_worlds_password_and_guards_reads(
    cli: Cli, nats_server_auth: NatsServer, spawn: Callable[..., Background], tmp_path: Path
) -> None:
    """As the chart runs it: the world's URL carries NATS credentials, every API request needs
    the token, and actions are refused even with it."""
    cli.world = f"nats://wayline:s3cret%3Apw@127.0.0.1:{nats_server_auth.port}?prefix=cpw"
    started = cli.here("start", f"{FLOWS}:add", "--input", "[1, 2]")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    token = tmp_path / "token"
    token.write_text("a-console-token-of-some-length\n")
    console = spawn(
        "console", "--port", "0", "--token-file", str(token), "--reads-need-token", "--read-only"
    )
    said = console.wait_for("wayline console on http://")
    found = re.search(r"http://127\.0\.0\.1:(\d+)/ \(read-only, reads need the token\)", said)
    assert found is not None, said
    assert "s3cret" not in said
    auth = {"Authorization": "Bearer a-console-token-of-some-length"}
    with httpx.Client(base_url=f"http://127.0.0.1:{found.group(1)}", timeout=10) as http:
        assert http.get("/api/runs").status_code == 401
        assert [r["runId"] for r in http.get("/api/runs", headers=auth).json()["runs"]] == [run_id]
        info = http.get("/api/info", headers=auth).json()
        assert info["readOnly"] is True and "s3cret" not in info["world"], info
        assert http.post(f"/api/runs/{run_id}/cancel", headers=auth).status_code == 403
        assert http.get("/healthz").status_code == 200
    assert console.stop(signal.SIGTERM) == 0


def test_reads_that_need_a_token_need_a_token_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = f"sqlite:///{tmp_path / 'w.db'}"
    assert main(["console", "--world", world, "--reads-need-token"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--reads-need-token needs --token-file" in err[0], err


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot be read"), ("short\n", "fewer than 16 characters")],
)
def test_a_token_file_it_cannot_use_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, said: str
) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    world = f"sqlite:///{tmp_path / 'w.db'}"
    assert main(["console", "--world", world, "--token-file", str(token)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: --token-file") and said in err[0]


def test_the_apps_modules_are_imported_at_start_and_one_that_does_not_import_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--app`` imports the application's modules when the console starts (so their typed
    hooks are checked with their classes; the console never imports what a log names)."""
    world = f"sqlite:///{tmp_path / 'w.db'}"
    missing = tmp_path / "no_such_app.py"
    assert main(["console", "--world", world, "--app", str(missing)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "no_such_app.py" in err[0], err
    marker = tmp_path / "imported"
    app = tmp_path / "console_app_at_start.py"
    app.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('yes')\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:  # the console stops at its bind
        port = str(taken.getsockname()[1])
        assert main(["console", "--world", world, "--app", str(app), "--port", port]) == 2
    assert "cannot listen" in capsys.readouterr().err
    assert marker.read_text() == "yes"  # imported before the port was tried


@pytest.mark.parametrize("code", ["", "0", "'usage: app'"], ids=["bare", "zero", "message"])
def test_an_app_module_that_exits_as_it_is_imported_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    """A module given to ``--app`` that calls ``sys.exit`` as it is imported (a script whose
    code is outside its ``__main__`` guard) stops the console with a clear error and exit
    code 2, not with the module's own code (0: a console that seemed to start and end well)."""
    world = f"sqlite:///{tmp_path / 'w.db'}"
    app = tmp_path / "console_app_that_exits.py"
    app.write_text(f"import sys\nsys.exit({code})\n")
    assert main(["console", "--world", world, "--app", str(app), "--port", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "exits as it is imported" in err[0], err
    assert f"{app}:2" in err[0], err
