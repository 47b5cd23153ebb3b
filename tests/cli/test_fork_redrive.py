"""``wayline runs fork`` and ``wayline runs redrive`` on both worlds, in-process with a live
worker: what they print, what ``runs show`` says of the link between a run and its forks,
who the log says asked for a redrive (``--by``, else the OS user), and the exit codes (2:
refused, naming why; 1: a bulk redrive that matches nothing)."""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path

import pytest

import wayline
from tests.runtime import fork_flows
from wayline._core.events import EventType, RunStatus
from wayline.cli import main


class _Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


async def test_fork_and_redrive_from_the_command_line(
    world_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = str(tmp_path / "m")

    async def cli(*argv: str) -> _Done:
        code = await asyncio.to_thread(main, [*argv, "--world", world_url])
        out, err = capsys.readouterr()
        return _Done(code, out, err)

    async def failed() -> str:
        return (await fork_flows.failed_run(client, fork_flows.order, path)).run_id

    world = wayline.open_world(world_url)
    async with world, wayline.Worker(world, [fork_flows.order]):
        client = wayline.Client(world)
        old, other = await failed(), await failed()
        Path(path + ".broken").unlink()  # noqa: ASYNC240 - the fix

        forked = await cli("runs", "fork", old, "--from-step", "fork_flows.charge")
        assert forked.returncode == 0, forked.stderr
        head = f"forked {old} from step fork_flows.charge#1 (s3) as "
        assert forked.stdout.startswith(head)
        new = forked.stdout[len(head) :].split(":")[0]
        assert await client.handle(new).result(timeout=20) == [
            "reserved book",
            "reserved pen",
            "charged 12",
            "shipped",
        ]
        assert f"fork      {new}" in (await cli("runs", "show", old)).stdout
        shown = (await cli("runs", "show", new)).stdout
        assert f"forked    from {old} at step fork_flows.charge#1 (s3)" in shown

        bad = await cli("runs", "fork", old, "--from-step", "fork_flows.refund")
        assert bad.returncode == 2
        assert bad.stderr.startswith(
            f"error: run {old} has no step 'fork_flows.refund' (its steps: "
        )

        dry = await cli("runs", "redrive", "--workflow", "fork_flows.order", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines() == [
            f"would redrive {other} (fork_flows.order) from step fork_flows.charge#1 (s3)",
            f"would redrive {old} (fork_flows.order) from step fork_flows.charge#1 (s3)",
            f"would redrive 2 of 2 runs, by {getpass.getuser()}",
        ]
        assert (await client.get_run(old)).status is RunStatus.FAILED  # a dry run changes none

        done = await cli("runs", "redrive", old, "--by", "carol", "--reason", "card updated")
        assert done.returncode == 0, done.stderr
        assert (
            done.stdout == f"redriven {old} (fork_flows.order) from step fork_flows.charge#1 (s3)\n"
        )
        await client.handle(old).result(timeout=20)
        shown = (await cli("runs", "show", old)).stdout
        assert (
            "redriven by carol from step fork_flows.charge#1 (s3), a fresh budget: card updated"
            in (shown)
        )
        ended = await cli("runs", "redrive", old)
        assert ended.returncode == 2
        assert ended.stderr == f"error: run {old} is completed; only a failed run is redriven\n"
        bulk = await cli("runs", "redrive", "--status", "failed", "--workflow", "fork_flows.order")
        assert bulk.returncode == 0, bulk.stderr
        assert bulk.stdout.splitlines()[0].startswith(f"redriven {other} ")
        await client.handle(other).result(timeout=20)
        [redriven] = [e for e in await world.list_events(other) if e.type is EventType.RUN_REDRIVEN]
        assert redriven.data["by"] == getpass.getuser()  # no --by: the OS user asked
        nothing = await cli("runs", "redrive", "--where", "tenant=nobody")
        assert nothing.returncode == 1
        assert nothing.stderr == "error: no failed run matches\n"
