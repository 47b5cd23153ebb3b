"""The ``wayline`` CLI end to end, through subprocesses on a SQLite world in ``tmp_path``."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

import wayline

from .conftest import FLOWS, REPO, Background, Cli

SDK_FLOWS = FLOWS.with_name("sdk_flows.py")

pytestmark = pytest.mark.timeout(90)  # a hang guard, not a timing (loaded 2 cores: >30 s)


def assert_clean_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], done.stderr


# --- run --------------------------------------------------------------------------------------
def test_run_prints_steps_as_they_happen_and_the_result(cli: Cli) -> None:
    done = cli.here("run", f"{FLOWS}:add", "--input", "[2, 3]")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": 5, "doubled": 10}
    progress = done.stderr
    assert "run started" in progress
    assert "step cli_tests.flaky started" in progress
    assert "step cli_tests.flaky attempt 1 failed: RuntimeError: transient; retry in" in progress
    assert "step cli_tests.flaky started (attempt 2)" in progress
    assert "step cli_tests.flaky completed" in progress
    assert "run completed" in progress
    assert "Traceback" not in progress


def test_run_finds_a_workflow_by_registered_name_in_a_dotted_module(cli: Cli) -> None:
    shutil.copy(FLOWS, cli.cwd / "myflows.py")
    done = cli.here("run", "myflows:greet", "--input", '{"name": "ada", "times": 2}')
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "HELLO ADA HELLO ADA"
    assert "sleep 50 ms" in done.stderr
    assert "done" in done.stderr


def test_a_failing_workflow_exits_1_with_its_error(cli: Cli) -> None:
    done = cli.here("run", f"{FLOWS}:broken", "--input", '"out of stock"')
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "step cli_tests.explode failed: FatalError: out of stock" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run wf_")
    assert "STEP_FAILED" in last
    assert "out of stock" in last
    assert "Traceback" not in done.stderr


# --- start + worker + runs --------------------------------------------------------------------
def test_start_then_a_separate_worker_finishes_the_runs(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    started = cli.here("start", f"{FLOWS}:greet", "--input", '{"name": "bob"}')
    assert started.returncode == 0, started.stderr
    first = started.stdout.strip()
    assert first.startswith("wf_")
    # a bare name no worker has ever registered on this world is refused, not left waiting
    refused = cli.here("start", "add", "--input", "[1, 1]")
    assert refused.returncode != 0
    assert "no worker has ever registered workflow 'add'" in refused.stderr
    shown = cli.json("runs", "show", first)
    assert shown["status"] == "pending"
    assert "waiting_for_worker" in shown["waitingForWorker"]
    assert "'greet'" in shown["waitingForWorker"]
    assert "waiting_for_worker" in cli.here("runs", "show", first).stdout

    worker = spawn("worker", "--app", str(FLOWS), "--flow-concurrency", "4")
    shown = cli.wait_status(first, "completed")
    assert shown["waitingForWorker"] is None
    by_name = cli.here("start", "add", "--input", "[1, 1]")  # a bare name: nothing imported
    assert by_name.returncode == 0, by_name.stderr
    second = by_name.stdout.strip()
    assert shown["output"] == "HELLO BOB"
    assert [s["name"] for s in shown["steps"]] == ["cli_tests.shout"]
    assert len(shown["waits"]) == 1
    assert cli.wait_status(second, "completed")["output"] == {"sum": 2, "doubled": 4}

    listed = cli.here("runs", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.strip().splitlines()
    assert header.split() == ["RUN", "ID", "WORKFLOW", "STATUS", "CREATED", "DURATION"]
    assert {row.split()[0] for row in rows} == {first, second}
    assert all("completed" in row for row in rows)
    assert {r["runId"] for r in cli.json("runs", "list", "--status", "completed")} == {
        first,
        second,
    }
    assert cli.json("runs", "list", "--status", "failed") == []

    text = cli.here("runs", "show", second).stdout
    assert "status    completed" in text
    assert "step cli_tests.flaky" in text
    assert "2 attempts" in text
    assert "attempt 1: failed after" in text
    assert "RuntimeError: transient" in text
    assert "attempt 2: completed" in text
    assert '"doubled": 4' in text

    assert worker.stop() == 0
    _, log = worker.output()
    assert "ready on" in log
    assert "SIGTERM: stopping" in log
    assert "worker stopped" in log


def test_hooks_resume_from_another_process_resumes_a_waiting_run(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    runner = spawn("run", f"{FLOWS}:approval", "--input", '"t-7"')
    # the hook's timeout is printed after its resume command: wait for the last line
    progress = runner.wait_for("hook approve:t-7 times out in")
    assert "hook approve:t-7 waiting for a payload" in progress
    assert f"wayline hooks resume approve:t-7 --payload 'JSON' --world {cli.world}" in progress
    assert "hook approve:t-7 times out in 10m 00s" in progress

    bad = cli.here("hooks", "resume", "approve:t-7", "--payload", '{"ok": tru')
    assert_clean_error(bad, "--payload is not valid JSON")

    good = cli.here("hooks", "resume", "approve:t-7", "--payload", '{"ok": true, "by": "grace"}')
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("resumed hook approve:t-7 of run wf_")
    assert runner.proc.wait(10) == 0
    out, err = runner.output()
    assert json.loads(out) == {"ticket": "t-7", "payload": {"ok": True, "by": "grace"}}
    assert 'hook approve:t-7 received {"ok": true, "by": "grace"}' in err

    again = cli.here("hooks", "resume", "approve:t-7", "--payload", "{}")  # answered: nothing to do
    assert again.returncode == 1, (again.stdout, again.stderr)
    assert again.stderr.strip().startswith("error: ") and "Traceback" not in again.stderr
    assert "approve:t-7" in again.stderr and "no longer active" in again.stderr


def test_input_and_payload_are_read_from_a_file_or_standard_input(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    """``--input @PATH`` / ``--payload @PATH`` (``@-``: standard input), as curl's ``-d
    @file``: a payload longer than one argument may be (128 KiB on Linux) can be given."""
    payload = {"note": "x" * 200_000, "ok": True}
    (cli.cwd / "payload.json").write_text(json.dumps(payload, indent=2))
    (cli.cwd / "ticket.json").write_text('"t-f"\n')
    with pytest.raises(OSError):  # what there was before: too long for argv
        cli("hooks", "resume", "approve:t-f", "--payload", json.dumps(payload))
    runner = spawn("run", f"{FLOWS}:approval", "--input", "@ticket.json")
    runner.wait_for("hook approve:t-f waiting for a payload")
    good = cli.here("hooks", "resume", "approve:t-f", "--payload", "@payload.json")
    assert good.returncode == 0, good.stderr
    assert runner.proc.wait(10) == 0
    assert json.loads(runner.output()[0]) == {"ticket": "t-f", "payload": payload}

    done = cli.here("run", f"{FLOWS}:add", "--input", "@-", stdin="[2, 3]")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": 5, "doubled": 10}
    started = cli.here("start", f"{FLOWS}:greet", "--input", "@-", stdin='{"name": "ada"}')
    assert started.returncode == 0, started.stderr
    shown = cli.json("runs", "show", started.stdout.strip())
    assert shown["input"] == {"args": [{"name": "ada"}]}


def test_runs_cancel_compensates_completed_steps(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    flag = cli.cwd / "offline"  # absent: compensations succeed
    kept = cli.here("start", f"{FLOWS}:saga", "--input", f'["a", "{flag}"]').stdout.strip()
    done = cli.here("start", f"{FLOWS}:greet", "--input", '{"name": "x"}').stdout.strip()
    worker = spawn("worker", "--app", str(FLOWS))
    cli.wait_status(done, "completed")
    wait_for_hook(cli, kept)

    cancelled = cli.here("runs", "cancel", kept, "--wait", "10")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"cancelled {kept}"
    shown = cli.json("runs", "show", kept)
    assert shown["status"] == "cancelled"
    assert [(s["name"], s["compensates"], s["status"]) for s in shown["steps"]] == [
        ("cli_tests.hold", None, "completed"),
        ("cli_tests.hold:compensate", "s1", "completed"),
    ]
    text = cli.here("runs", "show", kept).stdout
    assert "cancel requested (cancelled from the CLI)" in text
    assert "compensating completed steps" in text
    assert "step cli_tests.hold:compensate (reverses s1)" in text
    # an ended run: nothing to do (exit 1, one line), as docs/cli.md says of every verb
    again = cli.here("runs", "cancel", kept)
    assert again.returncode == 1
    assert again.stderr.strip() == f"error: run {kept} already ended (cancelled); nothing to cancel"
    unstuck = cli.here("runs", "resume-compensation", kept)
    assert unstuck.returncode == 1 and "not compensation_stuck" in unstuck.stderr
    answered = cli.here("hooks", "resume", "saga:a", "--payload", "{}")
    assert answered.returncode == 1 and "saga:a" in answered.stderr

    finished = cli.here("runs", "cancel", done)
    assert finished.returncode == 1
    assert "already ended (completed)" in finished.stderr
    assert worker.stop() == 0


def test_a_stuck_compensation_waits_for_a_person(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    flag = cli.cwd / "offline"
    flag.write_text("the warehouse is offline")
    stuck = cli.here("start", f"{FLOWS}:saga", "--input", f'["b", "{flag}"]').stdout.strip()
    worker = spawn("worker", "--app", str(FLOWS))
    wait_for_hook(cli, stuck)
    requested = cli.here("runs", "cancel", stuck)
    assert requested.returncode == 0, requested.stderr
    cli.wait_status(stuck, "compensation_stuck")
    text = cli.here("runs", "show", stuck).stdout
    assert "compensation stuck: reversing step cli_tests.hold failed" in text
    assert "warehouse offline" in text
    assert f"wayline runs resume-compensation {stuck} --world {cli.world}" in text
    assert_clean_error(
        cli.here("runs", "abandon-compensation", "wf_missing"), "no run 'wf_missing'"
    )
    # cancelling a stuck run again says who ends it (a person), not "is a worker running?",
    # and does not wait out --wait for what no worker will do
    # (in this process, and a --wait far above the bound: a process start under load took
    # most of the old 8 s of a 10 s --wait)
    began = time.monotonic()
    waited = cli.here("runs", "cancel", stuck, "--wait", "60")
    assert waited.returncode == 1 and "worker running" not in waited.stderr, waited.stderr
    assert time.monotonic() - began < 30, waited
    assert "compensation_stuck" in waited.stderr, waited.stderr
    assert f"wayline runs resume-compensation {stuck} --world {cli.world}" in waited.stderr
    again = cli.here("runs", "cancel", stuck)
    assert again.returncode == 0 and "a worker stops it" not in again.stdout, again.stdout
    assert f"wayline runs abandon-compensation {stuck} --world {cli.world}" in again.stdout

    flag.unlink()
    resumed = cli.here("runs", "resume-compensation", stuck)
    assert resumed.returncode == 0, resumed.stderr
    shown = cli.wait_status(stuck, "cancelled")
    assert [s["status"] for s in shown["steps"]] == ["completed", "failed", "completed"]
    assert worker.stop() == 0


def wait_for_hook(cli: Cli, run_id: str) -> None:
    # a bound, not a timing: a worker process spawned just before can take over 10 s to start
    # on a loaded machine
    deadline = time.monotonic() + 30
    shown = cli.json("runs", "show", run_id)
    while not shown["hooks"]:
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)
        shown = cli.json("runs", "show", run_id)
    assert shown["hooks"][0]["status"] == "waiting"


# --- bad input: exit 2, one clear line, no traceback, nothing changed -------------------------
@pytest.fixture
def existing_world(cli: Cli) -> str:
    """A world with one pending run, so 'unknown run' is not 'no database'."""

    async def start() -> str:
        async with wayline.LocalWorld(cli.cwd / "w.db") as world:
            handle = await wayline.Client(world).start("greet", {"name": "z"})
            return handle.run_id

    return asyncio.run(start())


BAD_INPUT = [
    pytest.param(["run", "no_such_module:wf"], ["no module named 'no_such_module'"], id="module"),
    pytest.param(["run", "missing.py:wf"], ["'missing.py'", "no such file"], id="file"),
    pytest.param(
        ["run", f"{FLOWS}:nope"],
        ["no workflow 'nope'", "workflows there: add, approval, broken, greet, lingering, saga"],
        id="workflow",
    ),
    pytest.param(
        ["start", f"{FLOWS}:nope", "--input", "1"], ["no workflow 'nope'"], id="start-workflow"
    ),
    pytest.param(["run", f"{FLOWS}"], ["several workflows"], id="which-workflow"),
    pytest.param(
        ["run", f"{FLOWS}:add", "--input", "[1,"], ["--input is not valid JSON"], id="json"
    ),
    pytest.param(
        ["start", "add", "--input", "{nope}"], ["--input is not valid JSON"], id="start-json"
    ),
    pytest.param(
        ["run", f"{FLOWS}:add", "--input", "[1]"], ["missing a required argument: 'b'"], id="arity"
    ),
    pytest.param(  # an object is one argument: the error says how to give two
        ["run", f"{FLOWS}:add", "--input", '{"a": 1, "b": 2}'],
        ["missing a required argument: 'b'", "an object is one argument", "array: [1, 2])"],
        id="input-object",
    ),
    pytest.param(  # an array is the arguments: the error says how to give one array
        ["start", f"{FLOWS}:approval", "--input", '["T-1", "T-2"]'],
        ["too many positional arguments", 'wrap it: [["T-1", "T-2"]])'],
        id="input-array",
    ),
    pytest.param(
        ["start", f"{FLOWS}:greet", "--input", '{"nam": "x"}'],
        ["does not match Greeting", "name: Field required"],
        id="input-type",
    ),
    pytest.param(["runs", "show", "wf_missing"], ["no run 'wf_missing'"], id="run-show"),
    pytest.param(["runs", "cancel", "wf_missing"], ["no run 'wf_missing'"], id="run-cancel"),
    pytest.param(
        ["hooks", "resume", "no-such-token", "--payload", "{}"],
        ["cannot resume 'no-such-token': no hook"],
        id="hook-token",
    ),
    pytest.param(["runs", "list", "--status", "bogus"], ["invalid choice: 'bogus'"], id="status"),
    pytest.param(["worker", "--app", "json"], ["'json' defines no workflow"], id="worker-app"),
    pytest.param(["worker"], ["--app"], id="worker-no-app"),
    pytest.param(
        ["start", "examples/orders.py"], ["'examples/orders.py': no such file"], id="start-file"
    ),
]


@pytest.mark.parametrize(("argv", "needles"), BAD_INPUT)
def test_bad_input_is_one_clear_line_and_exit_2(
    cli: Cli, existing_world: str, argv: list[str], needles: list[str]
) -> None:
    # about what the command says, not the process: in this process, loading the application
    # file afresh as a new process would (``own_registry``)
    assert_clean_error(cli.here(*argv), *needles)
    runs = cli.json("runs", "list")
    assert [r["runId"] for r in runs] == [existing_world]  # nothing started, nothing lost
    assert runs[0]["status"] == "pending"


def test_an_input_array_already_wrapped_gets_no_hint_to_wrap_it(
    cli: Cli, existing_world: str
) -> None:
    """``[["T-1"]]`` for a workflow of one string parameter is wrapped already: the type is
    wrong, and the error says that alone (no advice to wrap it once more)."""
    done = cli.here("start", f"{FLOWS}:approval", "--input", '[["T-1"]]')
    assert_clean_error(done, "approval")
    assert "wrap it" not in done.stderr, done.stderr
    assert [r["runId"] for r in cli.json("runs", "list")] == [existing_world]


@pytest.mark.parametrize(
    ("world", "needles"),
    [
        pytest.param("postgres://db/wayline", ["unsupported world URL 'postgres://db"], id="url"),
        pytest.param("sqlite:///", ["no database path"], id="empty-path"),
        pytest.param("sqlite:///{tmp}/absent.db", ["no world at", "does not exist"], id="absent"),
        pytest.param("sqlite:///{tmp}/garbage.db", ["is not a SQLite database"], id="garbage"),
        pytest.param("sqlite:///{tmp}", ["cannot be opened"], id="directory"),
    ],
)
def test_unusable_worlds_are_one_clear_line_and_exit_2(
    cli: Cli, world: str, needles: list[str]
) -> None:
    (cli.cwd / "garbage.db").write_bytes(b"this is not a database\n" * 200)
    world = world.format(tmp=cli.cwd)
    for argv in (["runs", "list"], ["start", "add", "--input", "[1, 2]"]):
        if "absent" in world and argv[0] == "start":
            continue  # start creates a new world where there is none
        assert_clean_error(cli.here(*argv, world=world), *needles)


def test_a_mistyped_nats_prefix_is_refused_by_commands_that_read(cli: Cli, nats_world: str) -> None:
    """``runs list`` (and every command that only reads or acts on what exists) against a
    NATS prefix where no world was ever created is an error, as an absent SQLite file is
    (test_unusable_worlds_are_one_clear_line_and_exit_2), and creates nothing; ``start``
    creates the world, and the commands then see it."""
    import nats

    world_url = nats_world

    for argv in (["runs", "list"], ["hooks", "list"], ["runs", "cancel", "wf_absent"]):
        assert_clean_error(cli.here(*argv), "no world at", "does not exist", "prefix")
    prefix = world_url.partition("prefix=")[2]

    async def streams() -> list[str]:
        nc = await nats.connect(world_url.partition("?")[0])
        try:
            return [info.config.name for info in await nc.jetstream().streams_info()]
        finally:
            await nc.close()

    assert not [name for name in asyncio.run(streams()) if name.startswith(prefix)]
    run_id = cli.here("start", f"{FLOWS}:add", "--input", "[1, 2]").stdout.strip()
    assert [r["runId"] for r in cli.json("runs", "list")] == [run_id]


def test_a_locked_database_is_reported_not_waited_on_forever(cli: Cli, existing_world: str) -> None:
    holder = sqlite3.connect(cli.cwd / "w.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE IF NOT EXISTS test_lock (x)")
        done = cli("runs", "list", timeout=15)
        assert_clean_error(done, "is locked by another process")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r["runId"] for r in cli.json("runs", "list")] == [existing_world]


def test_bad_settings_are_a_clean_error(cli: Cli) -> None:
    done = cli.here("run", f"{FLOWS}:add", "--input", "[1, 2]", WORKFLOW_INLINE_OWNERSHIP="maybe")
    assert_clean_error(done, "WORKFLOW_INLINE_OWNERSHIP must be 0/1/true/false")


def test_python_dash_m_wayline_is_the_wayline_command(cli: Cli) -> None:
    cli.here("start", f"{FLOWS}:add", "--input", "[1, 2]")
    argv = cli.argv("runs", "list", "--json")
    done = subprocess.run(
        [sys.executable, "-m", "wayline", *argv[3:]],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == cli.here("runs", "list", "--json").stdout
    assert len(json.loads(done.stdout)) == 1


def test_no_command_prints_help_and_exits_2(cli: Cli) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wayline.cli", "runs"],
        cwd=cli.cwd,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 2
    assert "list" in done.stderr
    assert "show" in done.stderr
    assert "cancel" in done.stderr


# --- the demo ---------------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_the_orders_demo_runs_to_the_end(cli: Cli) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "orders.py")],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in (
        "step orders.validate completed",
        "step orders.charge attempt 1 failed: GatewayTimeout",
        "step orders.charge completed",
        "hook approve:o-1001 waiting for a payload",
        "$ wayline hooks resume approve:o-1001 --payload",
        "resumed hook approve:o-1001 of run wf_",
        "sleep 1.00 s done",
        "step orders.ship completed",
        "run completed",
        '"status": "shipped"',
        "payment provider: 1 charge for ada@example.com",
    ):
        assert line in out, out
    assert "Traceback" not in done.stderr
    assert (cli.cwd / ".wayline" / "demo" / "payments.db").exists()


def test_an_interrupted_run_is_durable_and_a_worker_finishes_it(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    runner = spawn("run", f"{FLOWS}:approval", "--input", '"i-1"')
    runner.wait_for("resume it with:")
    assert runner.stop(signal.SIGINT) == 130
    _, err = runner.output()
    assert "interrupted; run wf_" in err
    assert f"wayline worker --app {FLOWS} --world {cli.world}" in err
    run_id = err.split("interrupted; run ")[1].split()[0]
    assert cli.json("runs", "show", run_id)["status"] == "running"

    worker = spawn("worker", "--app", str(FLOWS))
    resumed = cli.here("hooks", "resume", "approve:i-1", "--payload", '"yes"')
    assert resumed.returncode == 0, resumed.stderr
    shown = cli.wait_status(run_id, "completed")
    assert shown["output"] == {"ticket": "i-1", "payload": "yes"}
    assert worker.stop() == 0


def test_an_interrupted_run_whose_unwind_is_stuck_names_what_a_person_does(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    """A run interrupted while its compensation is stuck: no worker moves it on, so the
    message names the person's commands (resume or abandon), not a worker to start."""
    flag = cli.cwd / "offline"
    flag.write_text("the warehouse is offline")
    runner = spawn("run", f"{FLOWS}:saga", "--input", f'["c", "{flag}"]')
    runner.wait_for("resume it with:")
    run_id = cli.json("runs", "list")[0]["runId"]
    assert cli.here("runs", "cancel", run_id).returncode == 0
    cli.wait_status(run_id, "compensation_stuck")
    assert runner.stop(signal.SIGINT) == 130
    _, err = runner.output()
    assert f"interrupted; run {run_id} is durable and waits for a person" in err, err
    assert f"wayline runs resume-compensation {run_id} --world {cli.world}" in err, err
    assert f"wayline runs abandon-compensation {run_id} --world {cli.world}" in err, err
    assert "wayline worker --app" not in err, err


def test_start_takes_a_files_only_workflow_as_run_does(cli: Cli) -> None:
    """``wayline start FILE`` (no ``:WORKFLOW``) starts the file's one workflow, as ``run``
    takes it, and lists the choices when the file has several."""
    one = cli.cwd / "one.py"
    one.write_text(
        "import wayline\n\n\n@wayline.workflow(name='one.double')\n"
        "async def double(x: int) -> int:\n    return 2 * x\n"
    )
    started = cli.here("start", str(one), "--input", "[21]")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    assert cli.json("runs", "show", run_id)["workflow"] == "one.double"
    assert_clean_error(cli.here("start", str(FLOWS), "--input", "[1]"), "defines several workflows")


def test_hooks_list_runs_watch_and_runs_terminate(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    flag = cli.cwd / "offline"  # absent: a compensation would succeed (none may run)
    held = cli.here("start", f"{FLOWS}:saga", "--input", f'["a", "{flag}"]').stdout.strip()
    asked = cli.here("start", f"{FLOWS}:approval", "--input", '"t-9"').stdout.strip()
    worker = spawn("worker", "--app", str(FLOWS))
    wait_for_hook(cli, held)
    wait_for_hook(cli, asked)

    listed = cli.here("hooks", "list")
    assert listed.returncode == 0, listed.stderr
    assert "saga:a" in listed.stdout and "approve:t-9" in listed.stdout
    assert listed.stdout.splitlines()[0].split()[:3] == ["TOKEN", "RUN", "WORKFLOW"]
    one = cli.json("hooks", "list", "--run", asked)
    assert [(h["token"], h["runId"]) for h in one] == [("approve:t-9", asked)]
    assert one[0]["timeoutAt"] is not None  # the approval times out in 10m
    assert_clean_error(cli.here("hooks", "list", "--run", "wf_" + "0" * 32), "no run")

    watcher = spawn("runs", "watch", asked)
    deadline = time.monotonic() + 30  # a bound for a process to start under load
    while "waiting for a payload" not in watcher.output()[0]:
        assert time.monotonic() < deadline, watcher.output()
        time.sleep(0.05)
    assert cli.here("hooks", "resume", "approve:t-9", "--payload", '"ok"').returncode == 0
    assert watcher.proc.wait(10) == 0
    out, _ = watcher.output()
    assert "run started" in out and 'hook approve:t-9 received "ok"' in out
    assert "run completed" in out

    stopped = cli.here("runs", "terminate", held)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"terminated {held} (no compensations ran)"
    shown = cli.json("runs", "show", held)
    assert shown["status"] == "cancelled"
    assert [s["name"] for s in shown["steps"]] == ["cli_tests.hold"]  # no compensation step
    assert cli.here("hooks", "list").stdout.strip() == "no hook is waiting"
    again = cli.here("runs", "terminate", held)
    assert again.returncode == 1 and "already ended (cancelled)" in again.stderr
    assert again.stderr.startswith("error: ")
    ended = cli.here("runs", "watch", held)
    assert ended.returncode == 1 and "run cancelled" in ended.stdout
    assert worker.stop() == 0


def test_runs_fail_ends_a_live_run_without_compensations(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    flag = cli.cwd / "offline"
    run = cli.here("start", f"{FLOWS}:saga", "--input", f'["f", "{flag}"]').stdout.strip()
    worker = spawn("worker", "--app", str(FLOWS))
    wait_for_hook(cli, run)
    failed = cli.here("runs", "fail", run, "--reason", "rolled back for good")
    assert failed.returncode == 0, failed.stderr
    assert failed.stdout.strip() == f"failed {run}: rolled back for good"
    shown = cli.wait_status(run, "failed")
    assert shown["error"]["code"] == "TERMINATED"
    assert [(s["name"], s["status"]) for s in shown["steps"]] == [("cli_tests.hold", "completed")]
    again = cli.here("runs", "fail", run)
    assert again.returncode == 1
    assert "already ended (failed)" in again.stderr
    assert_clean_error(cli.here("runs", "fail", "wf_missing"), "no run 'wf_missing'")
    assert worker.stop() == 0


def _events_of(cli: Cli, run_id: str) -> list[str]:
    """The run's event types, read from the world file directly (no CLI process per poll)."""
    path = cli.world.removeprefix("sqlite:///")
    db = sqlite3.connect(path if path.startswith("/") else str(cli.cwd / path))
    try:
        rows = db.execute("SELECT type FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [r[0] for r in rows.fetchall()]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def _wait_event(cli: Cli, run_id: str, event: str, count: int = 1) -> None:
    deadline = time.monotonic() + 20
    while _events_of(cli, run_id).count(event) < count:
        assert time.monotonic() < deadline, f"{event} x{count} never came for {run_id}"
        time.sleep(0.05)


@pytest.mark.timeout(90)
def test_runs_wake_and_a_typed_hook_refusing_a_bad_payload(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    started = cli.here("start", f"{SDK_FLOWS}:nap_then_approve", "--input", '"t-9"')
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    spawn("worker", "--app", str(SDK_FLOWS))
    _wait_event(cli, run_id, "wait_created")
    missing = cli.here("runs", "wake", run_id, "--wait", "w7")
    assert missing.returncode == 2 and "no pending wait 'w7'" in missing.stderr
    woke = cli.here("runs", "wake", run_id)
    assert woke.returncode == 0, woke.stderr
    assert woke.stdout.strip() == f"woke w1 of {run_id}"
    _wait_event(cli, run_id, "hook_created")
    listed = cli.json("hooks", "list", "--run", run_id)
    assert [(h["token"], h["metadata"]) for h in listed] == [("go:t-9", {"ticket": "t-9"})]
    assert listed[0]["type"].endswith(":Go")
    assert '{"ticket": "t-9"}' in cli.here("hooks", "list").stdout
    bad = cli.here("hooks", "resume", "go:t-9", "--payload", '{"approved": true}')
    assert_clean_error(bad, "go:t-9", "by: Field required")
    good = cli.here("hooks", "resume", "go:t-9", "--payload", '{"approved": true, "by": "ana"}')
    assert good.returncode == 0, good.stderr
    _wait_event(cli, run_id, "run_completed")
    text = cli.here("runs", "show", run_id).stdout
    assert "woken early" in text
    assert 'metadata {"ticket": "t-9"}' in text
    assert 'result    "ana"' in text


@pytest.mark.timeout(90)
def test_runs_tail_prints_a_step_stream(cli: Cli, spawn: Callable[..., Background]) -> None:
    started = cli.here("start", f"{SDK_FLOWS}:counting", "--input", "3")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    spawn("worker", "--app", str(SDK_FLOWS))
    tail = cli.here("runs", "tail", run_id, "--stream", "progress")  # follows until the close
    assert tail.returncode == 0, tail.stderr
    assert [json.loads(line) for line in tail.stdout.splitlines()] == [
        {"done": 1, "of": 3},
        {"done": 2, "of": 3},
        {"done": 3, "of": 3},
    ]
    resumed = cli.here(
        "runs", "tail", run_id, "--stream", "progress", "--start", "2", "--no-follow"
    )
    assert resumed.stdout.splitlines() == ['{"done": 3, "of": 3}']
    misspelled = cli.here("runs", "tail", run_id, "--stream", "progres")  # the run has ended
    assert misspelled.returncode == 1 and misspelled.stdout == ""
    assert "has nothing in stream 'progres'" in misspelled.stderr
    past = cli.here("runs", "tail", run_id, "--stream", "progress", "--start", "9", "--no-follow")
    assert past.returncode == 1 and "from index 9" in past.stderr
    negative = cli.here("runs", "tail", run_id, "--stream", "progress", "--start", "-3")
    assert negative.returncode == 2 and "an index counts from 0" in negative.stderr


@pytest.mark.timeout(90)
def test_runs_tail_says_lines_were_partial_only_when_it_printed_them(
    cli: Cli, spawn: Callable[..., Background]
) -> None:
    started = cli.here("start", f"{SDK_FLOWS}:counting_twice", "--input", "2")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    spawn("worker", "--app", str(SDK_FLOWS))
    tail = cli.here("runs", "tail", run_id, "--stream", "progress")  # follows until the close
    assert tail.returncode == 0, tail.stderr
    assert [json.loads(line)["attempt"] for line in tail.stdout.splitlines()] == [1, 1, 2, 2]
    assert "restarted (attempt 2): the lines above from it were partial" in tail.stderr
    # from index 3 (after the restart record): nothing of attempt 1 is printed, and no restart
    later = cli.here("runs", "tail", run_id, "--stream", "progress", "--start", "3", "--no-follow")
    assert [json.loads(line)["attempt"] for line in later.stdout.splitlines()] == [2, 2]
    assert "restarted" not in later.stderr
    # from index 2 (the restart record itself): it is said, but no lines above are claimed
    at = cli.here("runs", "tail", run_id, "--stream", "progress", "--start", "2", "--no-follow")
    assert [json.loads(line)["attempt"] for line in at.stdout.splitlines()] == [2, 2]
    assert "restarted (attempt 2)" in at.stderr
    assert "partial" not in at.stderr


def test_output_whose_reader_went_away_is_no_error(cli: Cli) -> None:
    """``wayline runs show RUN | head -1``: the reader closes the pipe early. The CLI stops
    writing quietly (exit 0, nothing on stderr), as other command-line tools do."""
    import os

    done = cli.here("run", f"{FLOWS}:add", "--input", "[2, 3]")
    assert done.returncode == 0, done.stderr
    run_id = cli.json("runs", "list")[0]["runId"]
    for args in (("runs", "show", run_id), ("runs", "list")):
        read, write = os.pipe()
        os.close(read)  # a reader that is gone before the first line
        try:
            ended = subprocess.run(
                cli.argv(*args),
                cwd=cli.cwd,
                env=cli.env,
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            os.close(write)
        assert ended.returncode == 0, ended.stderr
        assert ended.stderr == "", ended.stderr


def test_start_with_a_namespace_records_it_and_refuses_a_name_kubernetes_would(
    cli: Cli, world_url: str
) -> None:
    """`wayline start --namespace NAME` starts the run in that namespace (its WorkflowHooks
    answer the run's hooks, as for a WorkflowRun created there); a name no namespace can have
    is refused before anything is written."""
    started = cli.here(
        "start", f"{FLOWS}:greet", "--input", '{"name": "ns"}', "--namespace", "team-a"
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    assert cli.json("runs", "show", run_id)["attributes"]["namespace"] == "team-a"
    plain = cli.here("start", f"{FLOWS}:greet", "--input", '{"name": "ns"}').stdout.strip()
    assert "namespace" not in cli.json("runs", "show", plain)["attributes"]
    for bad in ("Team-A", "team_a", "-a", "a" * 64, ""):
        # refused by the argument's parser, before the application file is loaded: in-process
        refused = cli.here(
            "start", f"{FLOWS}:greet", "--input", '{"name": "ns"}', f"--namespace={bad}"
        )
        assert refused.returncode == 2, (bad, refused.stderr)
        assert "is not a namespace name" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    assert {r["runId"] for r in cli.json("runs", "list")} == {run_id, plain}
