"""``Cli.here``: a command run in the test's process (tests/cli/conftest.py) loads its
application file as the new process it stands for would, whatever the test process imported
or registered before, and leaves the test process as it found it."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from wayline._core import definitions

from .conftest import Cli

APP = """
import wayline


@wayline.workflow
async def {name}() -> int:
    return {value}
"""


def test_a_command_run_here_loads_a_changed_application_file_afresh(cli: Cli) -> None:
    name = f"here_fresh_{uuid.uuid4().hex[:12]}"
    app = cli.cwd / "app.py"
    app.write_text(APP.format(name=name, value=1))
    first = cli.here("run", f"{app}:{name}")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == 1
    app.write_text(APP.format(name=name, value=22))  # another size: no stale bytecode
    second = cli.here("run", f"{app}:{name}")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == 22  # a new process would run the file as it is now


def test_a_command_run_here_does_not_see_what_the_test_process_registered(cli: Cli) -> None:
    """A workflow of the same implicit name registered in the test process (another test
    module's) is no clash for the command, as it is none for a new process; and the test
    process keeps its own registration and none of the command's modules."""
    name = f"here_clash_{uuid.uuid4().hex[:12]}"
    ours: dict[str, Any] = {}
    exec(APP.format(name=name, value=0), ours)  # registers ``name`` under another module
    app = cli.cwd / "app.py"
    app.write_text(APP.format(name=name, value=3))
    done = cli.here("run", f"{app}:{name}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 3
    assert definitions._IMPLICIT_WORKFLOWS[name] is ours[name]
    assert not any(getattr(m, "__file__", None) == str(app) for m in list(sys.modules.values()))


READS_STDIN = """
import sys

import wayline


@wayline.workflow
async def {name}() -> str:
    return sys.stdin.buffer.read().decode()
"""


def test_a_command_run_here_reads_its_standard_input_as_bytes_as_a_process_does(
    cli: Cli,
) -> None:
    """A process's standard input is text over a binary buffer, and ``--input @-`` reads the
    buffer (``json_text``): a command run here is given the same, so a test of ``@-`` in
    this process takes the branch a process takes, not a fallback no process reaches."""
    name = f"here_stdin_{uuid.uuid4().hex[:12]}"
    app = cli.cwd / "app.py"
    app.write_text(READS_STDIN.format(name=name))
    done = cli.here("run", f"{app}:{name}", stdin="piped in")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "piped in"
