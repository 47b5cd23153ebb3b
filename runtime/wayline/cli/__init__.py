"""The ``wayline`` command line.

::

    wayline run    MODULE_OR_FILE:WORKFLOW [--input JSON|@PATH]   start a run and drive it here
    wayline worker --app MODULE [--app ...] [--health-port N] serve runs until SIGTERM/SIGINT
                   [--processes N]   N processes under one supervisor (default: CPU quota)
    wayline start  MODULE_OR_FILE:WORKFLOW | NAME [--input JSON|@PATH]   start only; prints the id
                   [--id ID [--id-conflict P] [--id-reuse P]]   once per business id
                   [--priority N] [--fairness-key K [--fairness-weight W]]   its ordering
    wayline runs list [--status S] [--json]
    wayline runs show RUN_ID [--json]
    wayline runs watch RUN_ID                                  the live timeline until it ends
    wayline runs cancel RUN_ID [--wait SECONDS]
    wayline runs terminate RUN_ID                              stop now, no compensations
    wayline runs pause RUN_ID [--reason R]                     start nothing new until unpaused
    wayline runs unpause RUN_ID [--reason R]                   let a paused run go on
    wayline runs fork RUN_ID --from-step NAME[#N] [--id ID]    a new run from a step on
    wayline runs redrive RUN_ID... | --where EXPR --status failed [--dry-run]
                   [--reason R] [--by WHO]   failed runs again from their failed step
    wayline runs fail RUN_ID [--reason TEXT]
    wayline runs wake RUN_ID [--wait WAIT_ID]
    wayline runs tail RUN_ID --stream NAME [--start INDEX] [--no-follow] [--show-index]
    wayline runs resume-compensation RUN_ID | abandon-compensation RUN_ID
    wayline runs repair RUN_ID [--drop-seq N]   remove a corrupt run's unreadable log entry
    wayline hooks list [--run RUN_ID] [--json]                open hooks and their tokens
    wayline hooks resume TOKEN --payload JSON|@PATH
    wayline queue drain-lanes [--held-too]   work of a priority or a key onto the one subject
                   a release before the priority levels reads (before rolling back to it)
    wayline schedules add NAME --cron EXPR --workflow W | list | remove NAME | run  (cron)
    wayline console [--port N] [--host ADDRESS] [--token-file PATH]   web console and HTTP API
    wayline doctor [--monitor http://HOST:8222] [--strict]   reachability, auth, TLS, limits,
                   and whether the store fsyncs before it acknowledges a write

A RUN_ID is a run id (``wf_`` and 32 hex digits) or the business id a run was started with
(``wayline start --id order-123``; with ``--namespace NAME`` for one started in a namespace),
which names the newest run started with it.

Every command takes ``--world URL`` (default ``$WAYLINE_WORLD``, else
``sqlite:///.wayline/wayline.db``). ``--input``: a JSON array is the positional arguments
(``'[1, 2]'``), any other JSON value is the single argument (``'{"id": 7}'``), so a workflow
taking one list is given ``'[[1, 2]]'``. As curl's ``-d @file``, ``--input`` and ``--payload``
take ``@PATH`` to read the JSON from a file (``@-``: standard input), for a payload over the
command line's length limit; a file that cannot be read is bad input naming the option and the
path. (JSON never starts with ``@``.)

``wayline run`` prints its live progress (each step starting, completing, retrying or
failing; hooks waiting, with the exact command that resumes them; sleeps) on stderr and the
run's result as JSON on stdout, so ``wayline run ... > result.json`` keeps only the result.
``run`` and ``worker`` export the world they use as ``WAYLINE_WORLD`` to user code.

Exit codes (docs/cli.md has each verb's cases): 0 done; 1 nothing to do (the run had ended,
the wait had fired, the hook was answered; one ``error: ...`` line on stderr), or the run failed
or was cancelled (``run``, ``runs watch``), or a ``doctor`` check failed (with ``--strict``,
warned); 2 refused or bad input (unknown module, workflow, run, wait, hook token or schedule
name; invalid JSON; an unsupported world URL or an unusable database; a run whose log does not
read), always as a single ``error: ...`` line on stderr; 70 a sync step body
outlived its delivery's deadline, so the process exits for the delivery to go to another
worker (docs/ownership.md); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence

from .. import logs, loops
from .._core.events import RunStatus
from ..errors import WaylineError
from ..settings import Settings
from ..world.business_ids import ID_CONFLICT_POLICIES, ID_REUSE_POLICIES
from . import commands, doctor, forking, maintenance, pausing, replay, schedules, web
from .loading import (
    UsageError,
    UsageParser,
    add_run_argument,
    attr_arg,
    business_id_arg,
    fairness_key_arg,
    fairness_weight_arg,
    namespace_arg,
    port_arg,
    priority_arg,
    seconds_arg,
    where_arg,
    whole_arg,
)
from .maintenance import duration_arg

__all__ = ["build_parser", "main"]


def _add_world(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--world",
        metavar="URL",
        default=default,
        help="sqlite:///relative.db, sqlite:////abs/path.db or nats://host:4222 "
        "(default: $WAYLINE_WORLD, else sqlite:///.wayline/wayline.db)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(
        prog="wayline",
        description="Run and inspect durable Wayline workflows.",
        epilog="Exit codes: 0 done, 1 nothing to do (or the run failed/cancelled, or a doctor "
        "check failed), 2 refused or bad input, "
        "70 a sync step body outlived its deadline, 130 interrupted.",
    )
    _add_world(parser, None)
    parser.add_argument("--version", action="version", version=f"wayline {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=UsageParser)

    def command(
        parent: argparse._SubParsersAction[UsageParser], name: str, help: str
    ) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help, description=help)
        _add_world(p, argparse.SUPPRESS)
        return p

    p = command(sub, "run", "start a run and drive it in this process until it ends")
    p.add_argument(
        "target",
        metavar="MODULE_OR_FILE:WORKFLOW",
        help="without :WORKFLOW, the module's or file's one workflow",
    )
    p.add_argument(
        "--input",
        metavar="JSON",
        help="a JSON array is the positional arguments; any other value is the one argument "
        "(@PATH reads the JSON from a file, @- from standard input)",
    )
    p.set_defaults(handler=commands.cmd_run)

    p = command(sub, "worker", "execute runs (flow and step deliveries) until SIGTERM/SIGINT")
    p.add_argument(
        "--app",
        metavar="MODULE",
        action="append",
        required=True,
        help="module (dotted) or .py file whose workflows this worker serves; repeatable",
    )
    p.add_argument("--flow-concurrency", type=_positive, default=64, metavar="N")
    p.add_argument("--step-concurrency", type=_positive, default=64, metavar="N")
    p.add_argument(
        "--shutdown-grace",
        type=seconds_arg,
        default=30.0,
        metavar="SECONDS",
        help="how long in-flight deliveries may take to finish on shutdown (default 30)",
    )
    p.add_argument(
        "--queue",
        metavar="NAME",
        help="serve the runs started with --queue NAME (instead of those of the app's "
        "workflows by name)",
    )
    p.add_argument(
        "--draining",
        action="store_true",
        help="drive only the runs already pinned to the app's definitions and take no new run "
        "(an old version on its way out; also WAYLINE_WORKER_DRAINING=1)",
    )
    p.add_argument(
        "--health-port",
        type=port_arg,
        metavar="PORT",
        help="serve /healthz and /readyz (ready = connected to the world and consuming) here",
    )
    p.add_argument(
        "--health-host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address of the health endpoints (default 127.0.0.1; in a pod, the pod's IP)",
    )
    p.add_argument(
        "--processes",
        type=_positive,
        metavar="N",
        help="worker processes under one supervisor, each with its own world connection "
        "(default: the CPUs of the container's quota, else the CPUs available); only the "
        "first serves --health-port and --metrics-port",
    )
    p.add_argument("--supervised-by", type=int, help=argparse.SUPPRESS)  # the supervisor's pid
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="json: one JSON object a line, with run_id and step when a record has them",
    )
    p.add_argument(
        "--metrics-port",
        type=port_arg,
        metavar="PORT",
        help="serve Prometheus metrics on this port (/metrics); needs the metrics extra",
    )
    p.add_argument(
        "--metrics-host",
        default="0.0.0.0",
        metavar="ADDRESS",
        help="the address the metrics server binds (default 0.0.0.0)",
    )
    p.set_defaults(handler=commands.cmd_worker)

    p = command(sub, "start", "start a run (a worker executes it) and print its id")
    p.add_argument(
        "target",
        metavar="MODULE_OR_FILE:WORKFLOW|NAME",
        help="with a module, the input is checked against the workflow; a FILE.py alone "
        "names its one workflow (as for `wayline run`); a bare NAME is started without "
        "importing anything",
    )
    p.add_argument("--input", metavar="JSON", help="as for `wayline run`")
    p.add_argument(
        "--queue", metavar="NAME", help="route the run to the workers started with --queue NAME"
    )
    p.add_argument(
        "--namespace",
        type=namespace_arg,
        metavar="NAME",
        help="start the run in a Kubernetes namespace: that namespace's WorkflowHooks answer "
        "its hooks (as for a WorkflowRun created there); default: none",
    )
    p.add_argument(
        "--id",
        type=business_id_arg,
        metavar="ID",
        help="a business id (such as order-123: 1 to 256 printable characters): the run is "
        "found by it (wayline runs show ID) and started once per id (see --id-reuse)",
    )
    p.add_argument(
        "--id-conflict",
        choices=ID_CONFLICT_POLICIES,
        default="use_existing",
        help="when a run of --id exists and none is started: print its id (use_existing, "
        "the default) or fail (exit 1)",
    )
    p.add_argument(
        "--id-reuse",
        choices=ID_REUSE_POLICIES,
        default="reject_duplicate",
        help="when the newest run of --id has ended: start a new one (allow_duplicate), only "
        "if it failed or was cancelled (allow_duplicate_failed_only), or never "
        "(reject_duplicate, the default)",
    )
    p.add_argument(
        "--attr",
        type=attr_arg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a search attribute of the run (repeatable): a number, true/false, an ISO date, "
        '[a,b] for a list of strings, "quoted" or any other text for a string',
    )
    p.add_argument(
        "--priority",
        type=priority_arg,
        default=None,
        metavar="N",
        help="the run's priority, 0 (served first) to 9; default 5 (docs/sdk.md, "
        '"Priority and fairness")',
    )
    p.add_argument(
        "--fairness-key",
        type=fairness_key_arg,
        default=None,
        metavar="K",
        help="the run's fairness key (a tenant's name, 1 to 256 characters): ready work of "
        "every key is served in turn",
    )
    p.add_argument(
        "--fairness-weight",
        type=fairness_weight_arg,
        default=None,
        metavar="W",
        help="turns per round of --fairness-key, 1 to 100; default 1",
    )
    p.set_defaults(handler=commands.cmd_start)

    runs = command(sub, "runs", "list, show, watch, cancel, terminate and repair runs")
    runs.set_defaults(help_parser=runs)
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND", parser_class=UsageParser)
    p = command(runs_sub, "list", "list runs, newest first")
    p.add_argument("--status", choices=[s.value for s in RunStatus])
    p.add_argument("--workflow", metavar="NAME")
    p.add_argument(
        "--where",
        type=where_arg,
        action="append",
        default=[],
        metavar="EXPR",
        help="runs whose search attributes satisfy KEY OP VALUE (OP: = != > >= < <=; "
        "repeatable, all must hold), e.g. --where tenant=acme --where 'amount>100'",
    )
    p.add_argument(
        "--since",
        type=duration_arg,
        metavar="DURATION",
        help="runs created in the last DURATION (30s, 15m, 1h, 2d)",
    )
    p.add_argument("--limit", type=_positive, default=50, metavar="N")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=commands.cmd_runs_list)
    p = command(runs_sub, "show", "a run's timeline: steps, attempts, hooks, sleeps, result")
    add_run_argument(p)
    p.add_argument("--json", action="store_true", help="machine-readable output with the events")
    p.set_defaults(handler=commands.cmd_runs_show)
    p = command(
        runs_sub,
        "cancel",
        "cancel a run: a worker stops it and runs the compensations of its completed steps",
    )
    add_run_argument(p)
    p.add_argument("--reason", default="cancelled from the CLI")
    p.add_argument(
        "--wait",
        type=seconds_arg,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for the run to end cancelled (exit 1 if it does not; at once "
        "when its unwind is stuck, which a person resumes or abandons)",
    )
    p.set_defaults(handler=commands.cmd_runs_cancel)
    p = command(runs_sub, "watch", "print a run's timeline as it happens, until it ends")
    add_run_argument(p)
    p.add_argument("--poll", type=float, default=0.2, metavar="SECONDS", help=argparse.SUPPRESS)
    p.set_defaults(handler=commands.cmd_runs_watch)
    p = command(
        runs_sub,
        "terminate",
        "stop a run now without running its compensations; it ends cancelled (its running "
        "children are terminated too)",
    )
    add_run_argument(p)
    p.add_argument("--reason", default="terminated from the CLI")
    p.set_defaults(handler=commands.cmd_runs_terminate)
    p = command(
        runs_sub,
        "pause",
        "hold a pending or running run: it starts no new step, child, hook or sleep until "
        "unpaused (a step already running finishes)",
    )
    add_run_argument(p, optional=True)
    p.add_argument("--reason", default="paused from the CLI", help="recorded in the run's log")
    pausing.add_bulk(p, where_arg, "pending and running")
    p.set_defaults(handler=pausing.cmd_runs_pause)
    p = command(runs_sub, "unpause", "let a paused run go on from where it stopped")
    add_run_argument(p, optional=True)
    p.add_argument("--reason", default="unpaused from the CLI", help="recorded in the run's log")
    pausing.add_bulk(p, where_arg, "paused")
    p.set_defaults(handler=pausing.cmd_runs_unpause)
    forking.add_commands(runs_sub, command, where_arg, duration_arg)
    p = command(runs_sub, "tail", "print what a run's steps write to a stream, as it comes")
    add_run_argument(p)
    p.add_argument("--stream", required=True, metavar="NAME", help="the stream's name")
    p.add_argument(
        "--start", type=_index, default=0, metavar="INDEX", help="resume from INDEX (from 0)"
    )
    p.add_argument("--no-follow", action="store_true", help="print what is stored, then exit")
    p.add_argument(
        "--show-index",
        action="store_true",
        help="print each record as INDEX<TAB>JSON (INDEX + 1 is where --start resumes after it)",
    )
    p.set_defaults(handler=commands.cmd_runs_tail)
    p = command(runs_sub, "wake", "fire a run's pending sleeps now (recorded as an early wake)")
    add_run_argument(p)
    p.add_argument("--wait", metavar="WAIT_ID", help="only this wait (w1, or h1.timeout)")
    p.set_defaults(handler=commands.cmd_runs_wake)
    p = command(
        runs_sub,
        "fail",
        "end a live run failed now, without compensations (a run blocked by a replay "
        "divergence that no rollback will rescue); its running children are terminated",
    )
    add_run_argument(p)
    p.add_argument("--reason", default="failed from the CLI")
    p.set_defaults(handler=commands.cmd_runs_fail)
    p = command(
        runs_sub,
        "resume-compensation",
        "try the failed reversal of a compensation_stuck run again",
    )
    add_run_argument(p)
    p.set_defaults(handler=commands.cmd_runs_compensation, action="resume")
    p = command(
        runs_sub,
        "abandon-compensation",
        "give up the unwind of a compensation_stuck run; it ends failed or cancelled, and "
        "the reversals still waiting are never run (it prints them)",
    )
    add_run_argument(p)
    p.set_defaults(handler=commands.cmd_runs_compensation, action="abandon")
    maintenance.add_repair(runs_sub, command)
    replay.add_commands(sub, runs_sub, command)

    maintenance.add_commands(sub, command)
    schedules.add_commands(sub, command)
    doctor.add_doctor(sub, command)
    web.add_console(sub, command)

    hooks = command(sub, "hooks", "list and resume hooks")
    hooks.set_defaults(help_parser=hooks)
    hooks_sub = hooks.add_subparsers(
        dest="hooks_command", metavar="COMMAND", parser_class=UsageParser
    )
    p = command(hooks_sub, "list", "the hooks live runs wait on, with their tokens")
    p.add_argument("--run", metavar="RUN_ID", help="only this run's hooks")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=commands.cmd_hooks_list)
    p = command(hooks_sub, "resume", "deliver a payload to the hook holding TOKEN")
    p.add_argument("token", metavar="TOKEN")
    p.add_argument(
        "--payload",
        metavar="JSON",
        help="the payload as JSON (default: null); @PATH reads it from a file, @- from "
        "standard input",
    )
    p.add_argument(
        "--buffer",
        metavar="DURATION",
        help="when no hook holds TOKEN yet, keep the payload this long (e.g. 10m, at most 7d) "
        "for the first hook a run creates for it, instead of failing",
    )
    p.add_argument(
        "--delivery-id",
        metavar="ID",
        help="deliver (or buffer) the payload once under this id, however often the command "
        "is repeated",
    )
    p.set_defaults(handler=commands.cmd_hooks_resume)
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("wayline")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "unknown"


def _index(text: str) -> int:
    return whole_arg(text, 0, "an index counts from 0")


def _positive(text: str) -> int:
    return whole_arg(text, 1, "must be at least 1")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        # `wayline`, `wayline runs` or `wayline hooks` alone: show what there is.
        helper: argparse.ArgumentParser = getattr(args, "help_parser", parser)
        helper.print_help(sys.stderr)
        return 2
    try:
        if args.world is None:
            args.world = Settings.from_env().world_url
        level = getattr(args, "log_level", "WARNING")
        logs.configure(getattr(logging, level), getattr(args, "log_format", "text"))
        factory = loops.loop_factory(Settings.from_env().event_loop)
        with asyncio.Runner(loop_factory=factory) as runner:
            code: int = runner.run(args.handler(args))
        return code
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except WaylineError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wayline: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``| head``): stop writing quietly, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
