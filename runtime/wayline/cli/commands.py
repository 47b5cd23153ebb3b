"""What each ``wayline`` subcommand does. Each returns the process exit code (docs/cli.md): 0
done, 1 nothing to do (said in one ``error:`` line on stderr) or the run failed, 2 refused or
bad input (raised as :class:`UsageError` or a WaylineError and printed by ``main`` as one
``error:`` line)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .. import metrics, telemetry
from .._core import ordering
from .._core.cancels import stop_if_cancelled
from .._core.definitions import WorkflowDefinition
from .._core.events import RUN_TERMINAL_EVENTS, RunStatus
from .._core.projections import RunInfo, fold, timeout_of
from .._engine.tasks import spawn
from ..client import Client
from ..durations import to_seconds
from ..errors import (
    CorruptLogError,
    HookNotFoundError,
    RunAlreadyExistsError,
    RunNotFoundError,
    SerializationError,
    WaylineError,
    WorldNotCreatedError,
    WorldUnavailableError,
)
from ..health import HealthServer
from ..settings import Settings
from ..start_options import StartOptions
from ..waits import wait_set
from ..worker import Worker
from ..world import World
from ..world.entries import corrupt_info
from ..world.hook_buffer import MAX_BUFFER_SECONDS
from ..world.open import open_world
from ..world.registry import ever_served
from .loading import (
    UsageError,
    import_app,
    input_given,
    load_target,
    looks_like_file,
    option_json,
    split_target,
    workflows_in,
)
from .supervisor import Supervisor, default_processes, die_with_parent, orphaned
from .timeline import (
    LiveProgress,
    abandoned_text,
    fmt_duration,
    fmt_error,
    fmt_json,
    fmt_time,
    render_show,
    run_to_json,
    unstick_commands,
)

log = logging.getLogger("wayline.cli")

SQLITE = "sqlite:///"
PARENT_DEATH = signal.SIGHUP
"""What a supervised child is sent when its supervisor ends (``_bound_to``)."""

T = TypeVar("T")


def absolute_world_url(url: str) -> str:
    """A sqlite URL with an absolute path, so a printed command works from any directory."""
    if url.startswith(SQLITE):
        path, mark, query = url[len(SQLITE) :].partition("?")
        if path and not path.startswith("/"):
            return SQLITE + str(Path(path).resolve()) + mark + query
    return url


def sqlite_path(url: str) -> Path | None:
    """The database file of a sqlite URL (without its ``?sync=...`` options)."""
    path = url[len(SQLITE) :].partition("?")[0] if url.startswith(SQLITE) else ""
    return Path(path) if path else None


@contextlib.asynccontextmanager
async def opened_world(
    url: str, *, create: bool, wait_seconds: float = 0.0
) -> AsyncIterator[World]:
    """The world at ``url``, started. Without ``create`` a missing SQLite file (or a NATS
    world's missing stream) is an error rather than a new empty world (a mistyped --world
    should not look like "no runs"). With
    ``wait_seconds``, a server world that is not reachable yet (a worker pod starting before
    its NATS) is tried again until then, instead of failing at once."""
    path = sqlite_path(url)
    if not create and path is not None and not path.exists():
        open_world(url)  # a bad option in the URL is named first: it is the first mistake
        raise UsageError(
            f"no world at {url}: {path} does not exist (check --world or WAYLINE_WORLD)"
        )
    deadline = time.monotonic() + (wait_seconds if path is None else 0.0)
    delay = 0.5
    # a NATS world without its streams is refused too, not created (its prefix mistyped)
    options = {} if create or url.partition("://")[0] not in ("nats", "tls") else {"create": False}
    while True:
        world = open_world(url, **options)
        try:
            await world.start()
            break
        except OSError as err:  # worlds map their failures to WorldUnavailableError
            raise UsageError(f"cannot open the world at {shown_url(world)}: {err}") from None
        except asyncio.CancelledError:  # a stop while connecting: leave nothing open
            with contextlib.suppress(Exception):
                await world.close()
            raise
        except (WorldUnavailableError, WorldNotCreatedError) as err:
            # not created yet: a console pod may start before the workers that create the
            # world's streams; told to wait, it waits for them as for a server not up yet
            with contextlib.suppress(Exception):
                await world.close()
            if time.monotonic() + delay > deadline:
                raise
            stop_if_cancelled()  # a stop that the failed attempt swallowed
            log.warning(
                "the world at %s is %s (%s); again in %.1fs",
                shown_url(world),
                "not created yet" if isinstance(err, WorldNotCreatedError) else "not reachable yet",
                err,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)
    try:
        yield world
    finally:
        await world.close()


def shown_url(world: World) -> str:
    """The world's URL as messages may show it: a server world's own ``url`` leaves out its
    password (a log line or an error must not carry it); the local world's path has none."""
    return str(getattr(world, "url", "") or world)


def validate_input(
    definition: WorkflowDefinition[..., Any], args: list[Any], given: Any = None
) -> None:
    """Refuse input the workflow cannot take before a run exists (exit 2, not a failed run),
    with the check and message of ``Client.start`` (``WorkflowDefinition.encode_input``).
    ``given`` is the ``--input`` value: when its shape is the likely mistake (an array for a
    workflow of one parameter, an object for one of several), the error says how to give it."""
    try:
        # the limits the client that starts the run reads (Client(world), from the environment)
        definition.encode_input(tuple(args), {}, limits=Settings.from_env().limits)
    except SerializationError as err:
        hint = _input_hint(list(definition.signature.sig.parameters), given)
        if hint is None:
            raise
        raise UsageError(f"{err.message} ({hint})") from None


def _input_hint(names: list[str], given: Any) -> str | None:
    wrapped_already = isinstance(given, list) and len(given) == 1 and isinstance(given[0], list)
    if isinstance(given, list) and len(names) == 1 and not wrapped_already:
        wrapped = json.dumps([given])
        shown = wrapped if len(wrapped) <= 60 else "[[...]]"
        return (
            "--input: a JSON array is the positional arguments; to give the one argument "
            f"{names[0]!r} an array, wrap it: {shown}"
        )
    if isinstance(given, dict) and len(names) > 1:
        example = "[...]"
        if set(given) <= set(names):
            ordered = json.dumps([given[n] for n in names if n in given])
            example = ordered if len(ordered) <= 60 else example
        return (
            "--input: an object is one argument, not the arguments by name; give "
            f"{', '.join(repr(n) for n in names)} as a JSON array: {example}"
        )
    return None


def publish_world(url: str) -> None:
    """User code (steps) and child processes see the world the CLI uses as WAYLINE_WORLD."""
    os.environ["WAYLINE_WORLD"] = url


class _Stop:
    """SIGINT/SIGTERM -> an event; a second signal exits at once (like a crash, which the
    runtime recovers from).

    In a child of ``supervisor`` SIGHUP is the kernel's parent-death signal (see
    ``_bound_to``): it stops the child as a first signal does, and is no second signal: a
    child that drains already when its supervisor is killed finishes its drain. A SIGHUP
    while the supervisor is alive (``kill -HUP``; the kernel re-parents a child before it
    signals it) is said and ignored: the supervisor, not a child, is stopped by a person."""

    def __init__(self, supervisor: int | None = None) -> None:
        self.event = asyncio.Event()
        self.signal: int | None = None
        self.supervisor = supervisor

    def install(self) -> Callable[[], None]:
        loop = asyncio.get_running_loop()
        signals = [signal.SIGINT, signal.SIGTERM]
        if self.supervisor is not None:
            signals.append(PARENT_DEATH)

        def on_signal(signum: int) -> None:
            if signum == PARENT_DEATH:
                if not orphaned(self.supervisor):  # sent by hand: the kernel re-parents first
                    log.warning("SIGHUP ignored: the supervisor (pid %s) is alive", self.supervisor)
                elif not self.event.is_set():
                    log.warning("the supervisor is gone: stopping")
                    self.event.set()
                return
            if self.event.is_set():
                print("wayline: second signal, exiting now", file=sys.stderr, flush=True)
                os._exit(130)
            self.signal = signum
            self.event.set()

        for s in signals:
            loop.add_signal_handler(s, on_signal, s)

        def remove() -> None:
            for s in signals:
                loop.remove_signal_handler(s)

        return remove


# --- run ------------------------------------------------------------------------------------
async def cmd_run(args: argparse.Namespace) -> int:
    definition, definitions = load_target(args.target)
    call_args, given = input_given(args.input)
    validate_input(definition, call_args, given)
    url = args.world
    publish_world(absolute_world_url(url))
    progress_out = sys.stderr
    async with opened_world(url, create=True) as world:
        client = Client(world, definitions)
        worker = Worker(world, definitions, recover=False)
        stop = _Stop()
        remove = stop.install()
        try:
            async with worker:
                handle = await client.start(definition, *call_args)
                progress = LiveProgress(progress_out, absolute_world_url(url))
                ended = await follow(world, handle.run_id, progress, stop.event)
        finally:
            remove()
        if not ended:
            module = shlex.quote(split_target(args.target)[0])
            where = absolute_world_url(url)
            try:  # one look, bounded: the person pressed Ctrl-C
                now = await asyncio.wait_for(client.get_run(handle.run_id), 2.0)
            except (WaylineError, TimeoutError):  # the world is away: the usual word, then
                now = None
            if now is not None and now.status is RunStatus.COMPENSATION_STUCK:
                # no worker moves it on: a person resumes or abandons its unwind first
                then = f"waits for a person: {unstick_commands(handle.run_id, where)}"
            else:
                then = (
                    "carries on when a worker runs: "
                    f"wayline worker --app {module} --world {shlex.quote(where)}"
                )
            print(
                f"wayline: interrupted; run {handle.run_id} is durable and {then}", file=sys.stderr
            )
            return 130
        info = await client.get_run(handle.run_id)
    if info.status is RunStatus.COMPLETED:
        print(json.dumps(info.output, indent=2, default=str))
        return 0
    if info.status is RunStatus.CANCELLED:
        print(f"error: run {info.run_id} was cancelled", file=sys.stderr)
        return 1
    # as `runs show` prints it: the code, then the step (or child) and what it raised
    print(f"error: run {info.run_id} failed: {fmt_error(info.error)}", file=sys.stderr)
    return 1


async def follow(
    world: World,
    run_id: str,
    progress: LiveProgress,
    stop: asyncio.Event | None = None,
    poll: float = 0.05,
) -> bool:
    """Print the run's events as they are appended until it ends (True) or ``stop`` (False)."""
    seen, failures = 0, 0
    while True:
        try:
            events = await world.list_events(run_id, after_seq=seen)
            failures = 0
        except WorldUnavailableError as err:
            failures += 1  # e.g. another process holds the SQLite file for a while
            if failures >= 10:
                raise
            log.warning("cannot read run %s yet: %s (retrying)", run_id, err.message)
            events = []
        if events:
            seen = events[-1].seq
            progress.feed(events)
            if any(e.type in RUN_TERMINAL_EVENTS for e in events):
                return True
        if stop is not None and stop.is_set():
            return False
        if stop is None:
            stop_if_cancelled()
            await asyncio.sleep(poll)
        else:
            await wait_set(stop, poll)


# --- worker ---------------------------------------------------------------------------------
async def cmd_worker(args: argparse.Namespace) -> int:
    if args.processes is None or args.processes > 1:
        processes = args.processes or default_processes()
        if processes > 1:
            import_apps(args.app)  # bad input fails here, once, not in every child
            _check_ports(args)
            return await Supervisor(lambda i: worker_child_argv(args, i), processes).run()
    if args.supervised_by is not None and not _bound_to(args.supervised_by):
        log.warning("the supervisor is gone: stopping")
        return 0
    definitions = import_apps(args.app)
    names = sorted({d.name for d in definitions})
    url = args.world
    publish_world(absolute_world_url(url))
    shutdown_traces = telemetry.configure("wayline-worker", Settings.from_env().otel_env)
    server = None
    if args.metrics_port is not None:
        with _port("--metrics-port", args.metrics_host, args.metrics_port):
            server = metrics.serve(args.metrics_port, args.metrics_host)
        log.info("metrics on http://%s:%d/metrics", args.metrics_host, server.server_port)
    try:
        return await _serve(args, definitions, names, url)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        shutdown_traces()


@contextlib.contextmanager
def _port(flag: str, host: str, port: int) -> Iterator[None]:
    """A port that cannot be bound (in use, not allowed) is a usage error: exit 2, one line,
    and a supervisor does not start the process again."""
    try:
        yield
    except OSError as err:
        why = err.strerror or str(err)
        raise UsageError(f"{flag} {port}: cannot listen on {host}:{port} ({why})") from None


def _bound_to(supervisor: int) -> bool:
    """In a child of ``supervisor``, first of all (importing the app and opening the world may
    take minutes): on Linux the kernel sends this process SIGHUP when the supervisor ends,
    which stops it in any phase (before ``_Stop`` handles it, by its default action). Not
    SIGTERM: the supervisor passes a person's SIGTERMs on, and a second one exits at once.
    False when the supervisor is already gone (it died before the signal was asked for, so
    none will come)."""
    die_with_parent(PARENT_DEATH)  # where it cannot, _watch_supervisor's polling remains
    return not orphaned(supervisor)


async def _watch_supervisor(supervisor: int, stop: _Stop) -> None:
    """Stops the worker once its supervisor is gone, while it waits for the world too: where
    no parent-death signal came (not Linux) the re-parenting is noticed within a second."""
    while not stop.event.is_set():
        if orphaned(supervisor):
            log.warning("the supervisor is gone: stopping")
            stop.event.set()
            return
        await wait_set(stop.event, 1.0)


async def _unless_stopped(opening: Awaitable[T], stop: _Stop) -> T | None:
    """What ``opening`` gives, or None when ``stop`` comes first (``opening`` is cancelled)."""
    task = asyncio.ensure_future(opening)
    stopped = asyncio.ensure_future(stop.event.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        return None
    opened = task.result()  # or what opening raised
    # Opened just as the stop came: None all the same (the caller closes what was opened).
    return None if stop.event.is_set() else opened


def _check_ports(args: argparse.Namespace) -> None:
    """Before any child starts: the ports process 0 will listen on can be bound now."""
    for flag, host, port in (
        ("--health-port", args.health_host, args.health_port),
        ("--metrics-port", args.metrics_host, args.metrics_port),
    ):
        if port:
            with _port(flag, host, port), socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))


async def _serve(
    args: argparse.Namespace,
    definitions: list[WorkflowDefinition[..., Any]],
    names: list[str],
    url: str,
) -> int:
    stop = _Stop(args.supervised_by)
    remove = stop.install()  # before the world: a stop while waiting for it ends the wait
    tasks: set[asyncio.Task[Any]] = set()
    if args.supervised_by is not None:
        spawn(_watch_supervisor(args.supervised_by, stop), "wayline-supervisor-watch", tasks)
    try:
        async with contextlib.AsyncExitStack() as stack:
            # a worker waits for its world (a pod may start before its NATS is ready)
            opening = stack.enter_async_context(opened_world(url, create=True, wait_seconds=300.0))
            world = await _unless_stopped(opening, stop)
            if world is None:
                if stop.signal is None:  # the supervisor is gone (logged)
                    log.info("worker stopped before its world was open")
                else:
                    name = signal.Signals(stop.signal).name
                    log.info("%s while waiting for the world: worker stopped", name)
                return 0
            return await _work(args, world, definitions, names, stop)
    finally:
        watchers = list(tasks)
        for task in watchers:
            task.cancel()
        if watchers:
            await asyncio.wait(watchers)
        remove()


async def _work(
    args: argparse.Namespace,
    world: World,
    definitions: list[WorkflowDefinition[..., Any]],
    names: list[str],
    stop: _Stop,
) -> int:
    """The worker on its open world until a stop (drained) or its failure."""
    worker = Worker(
        world,
        definitions,
        flow_concurrency=args.flow_concurrency,
        step_concurrency=args.step_concurrency,
        exit_on_invocation_deadline=True,
        shutdown_grace_seconds=args.shutdown_grace,
        queue=args.queue,
        draining=True if args.draining else None,
    )
    health = None
    if args.health_port is not None:
        health = HealthServer(worker, host=args.health_host, port=args.health_port)
        with _port("--health-port", args.health_host, args.health_port):
            await health.start()
        log.info("health endpoints on %s:%d (/healthz, /readyz)", args.health_host, health.port)
    try:
        await worker.start()
        log.info("worker %d ready on %s: workflows %s", os.getpid(), world.url, ", ".join(names))
        while not stop.event.is_set() and worker.failure is None:
            await wait_set(stop.event, 1.0)
        if stop.signal is not None:
            log.info(
                "%s: stopping (in-flight deliveries finish first, up to %gs)",
                signal.Signals(stop.signal).name,
                args.shutdown_grace,
            )
        await worker.close(graceful=True)
    finally:
        if health is not None:
            await health.close()
    if worker.failure is not None:
        log.error("worker failed: %s", worker.failure)
        return 1
    log.info("worker stopped")
    return 0


def import_apps(apps: list[str]) -> list[WorkflowDefinition[..., Any]]:
    """The workflows of ``--app`` modules (each must define one), each once."""
    definitions: list[WorkflowDefinition[..., Any]] = []
    for app in apps:
        module, sep, name = app.rpartition(":")
        if sep and module and name and not Path(app).exists():
            # `wayline run` takes MODULE_OR_FILE:WORKFLOW; --app takes the module alone
            raise UsageError(
                f"--app {app!r}: --app takes a module or .py file, not MODULE:WORKFLOW (it "
                f"stands for every workflow the module defines): --app {module}"
            )
        found = workflows_in(import_app(app))
        if not found:
            raise UsageError(f"{app!r} defines no workflow (decorate one with @wayline.workflow)")
        definitions.extend(d for d in found if d not in definitions)
    return definitions


def worker_child_argv(args: argparse.Namespace, index: int) -> list[str]:
    """The command line of child ``index`` of ``wayline worker --processes N``: the same
    options, one process, and only the first child serves the health endpoints."""
    argv = [sys.executable, "-m", "wayline.cli", "worker", "--processes", "1"]
    argv += ["--supervised-by", str(os.getpid())]
    argv += ["--world", absolute_world_url(args.world), "--log-level", args.log_level]
    argv += ["--log-format", args.log_format]
    for app in args.app:
        argv += ["--app", app]
    argv += ["--flow-concurrency", str(args.flow_concurrency)]
    argv += ["--step-concurrency", str(args.step_concurrency)]
    argv += ["--shutdown-grace", repr(args.shutdown_grace)]
    if args.queue is not None:
        argv += ["--queue", args.queue]
    if args.draining:
        argv += ["--draining"]
    if args.health_port is not None and index == 0:
        argv += ["--health-port", str(args.health_port), "--health-host", args.health_host]
    if args.metrics_port is not None and index == 0:  # one port per pod: process 0's counts
        argv += ["--metrics-port", str(args.metrics_port), "--metrics-host", args.metrics_host]
    return argv


# --- start ----------------------------------------------------------------------------------
async def cmd_start(args: argparse.Namespace) -> int:
    call_args, given = input_given(args.input)
    definition: WorkflowDefinition[..., Any] | None = None
    definitions: list[WorkflowDefinition[..., Any]] = []
    if ":" in args.target or looks_like_file(args.target):  # a file alone: its one workflow
        definition, definitions = load_target(args.target)
        validate_input(definition, call_args, given)
    async with opened_world(args.world, create=True) as world:
        if definition is None and not ever_served(args.target, await world.list_served()):
            raise UsageError(
                f"no worker has ever registered workflow {args.target!r} on {args.world}: "
                "start one (wayline worker --app MODULE_OR_FILE), check the name, or name the "
                "module too (MODULE_OR_FILE:WORKFLOW)"
            )
        client = Client(world, definitions, namespace=args.namespace)
        try:
            options = StartOptions(
                id=args.id,
                queue=args.queue,
                id_conflict=args.id_conflict,
                id_reuse=args.id_reuse,
                attributes=dict(getattr(args, "attr", None) or []) or None,
                **_ordering_given(args),
            )
            handle = await client.start_with(options, definition or args.target, *call_args)
        except RunAlreadyExistsError as err:
            print(f"error: {err.message}", file=sys.stderr)
            return 1
    print(handle.run_id)
    return 0


def _ordering_given(args: argparse.Namespace) -> dict[str, Any]:
    """The ``StartOptions`` fields of ``--priority``, ``--fairness-key`` and
    ``--fairness-weight`` given (each checked by its argparse type already)."""
    if args.fairness_weight is not None and args.fairness_key is None:
        raise UsageError(
            ordering.WEIGHT_WITHOUT_KEY.format(weight="--fairness-weight", key="--fairness-key")
        )
    given = {
        "priority": args.priority,
        "fairness_key": args.fairness_key,
        "fairness_weight": args.fairness_weight,
    }
    return {k: v for k, v in given.items() if v is not None}


# --- runs -----------------------------------------------------------------------------------
async def cmd_runs_list(args: argparse.Namespace) -> int:
    async with opened_world(args.world, create=False) as world:
        since = getattr(args, "since", None)
        runs = await world.list_runs(
            status=RunStatus(args.status) if args.status else None,
            workflow=args.workflow,
            limit=args.limit,
            where=getattr(args, "where", None) or (),
            since=None if since is None else world.now() - since,
        )
    if args.json:
        print(json.dumps([run_to_json(r) for r in runs], indent=2, default=str))
        return 0
    if not runs:
        print("no runs" + _filters_shown(args))
        return 0
    now = time.time()
    # the ID column only where a listed run was started with a business id: a list of runs
    # that have none keeps its columns
    ids = any(r.business_id is not None for r in runs)
    rows = [("RUN ID", *(("ID",) if ids else ()), "WORKFLOW", "STATUS", "CREATED", "DURATION")]
    for r in runs:
        if r.ended_at:
            took = fmt_duration(r.ended_at - r.created_at)
        else:
            took = fmt_duration(now - r.created_at) + " so far"
        named = (r.business_id or "-",) if ids else ()
        rows.append((r.run_id, *named, r.workflow, str(r.status), fmt_time(r.created_at), took))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _filters_shown(args: argparse.Namespace) -> str:
    """`` with status failed where tenant=acme``: what an empty list was asked for."""
    said = [f"with status {args.status}"] if args.status else []
    if args.workflow:
        said.append(f"of workflow {args.workflow}")
    wheres = getattr(args, "where", None) or []
    if wheres:
        said.append("where " + " and ".join(str(w) for w in wheres))
    if getattr(args, "since", None) is not None:
        said.append(f"created in the last {fmt_duration(args.since)}")
    return "".join(f" {part}" for part in said)


async def run_client(world: World, args: argparse.Namespace) -> Client:
    """The client of a command that acts on the run ``args.run_id`` names, which it makes
    that run's own id: a business id (of ``--namespace``) names the newest run started with
    it, and what the command then reads, does and prints is that run's."""
    # a Namespace built without the option (by a caller of the command function, not the
    # parser) names a run of no namespace, as the option's default does
    client = Client(world, namespace=getattr(args, "namespace", None))
    try:
        args.run_id = await client.resolve(args.run_id)
    except RunNotFoundError:
        raise await _no_run(client, args.run_id, args.world) from None
    return client


async def _get_run(client: Client, run_id: str, url: str) -> Any:
    try:
        return await client.get_run(run_id)
    except RunNotFoundError:
        raise await _no_run(client, run_id, url) from None


async def _no_run(client: Client, run_id: str, url: str) -> UsageError:
    try:
        archived = await client.world.archived_count()
    except NotImplementedError:  # a world without an archive
        archived = 0
    hint = "see: wayline runs list"
    if archived:  # it may be one of them: say so rather than "no such run" alone
        hint += f"; {archived} ended runs are archived (wayline archive) and not shown"
    return UsageError(f"no run {run_id!r} in {url} ({hint})")


async def cmd_runs_show(args: argparse.Namespace) -> int:
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        try:
            info = await _get_run(client, args.run_id, args.world)
            events = await world.list_events(args.run_id)
        except CorruptLogError as err:
            return _show_corrupt(args, err)
        waiting = await client.waiting_for_worker(info)
        forks = [fork.run_id for fork in await client.forks_of(info.run_id)]
        now, visibility = world.now(), world.visibility_seconds
    if args.json:
        from .timeline import fold

        out = run_to_json(info)
        out["waitingForWorker"] = waiting
        out["forks"] = forks
        out.update(fold(info.run_id, events).to_json())
        out["events"] = [e.to_json() for e in events]
        print(json.dumps(out, indent=2, default=str))
    else:
        render_show(
            info,
            events,
            sys.stdout,
            absolute_world_url(args.world),
            waiting,
            now=now,
            visibility_seconds=visibility,
            forks=forks,
        )
    return 0


def _show_corrupt(args: argparse.Namespace, err: CorruptLogError) -> int:
    """A fenced run cannot be shown: one ``error:`` line naming the entry and the command that
    repairs it, exit 2 as for every command refused by the damage (``--json``: the fenced view,
    status ``corrupt``, on stdout, with the same exit, for a tool that reads it)."""
    if args.json:
        out = run_to_json(corrupt_info(args.run_id, err))
        print(json.dumps(out, indent=2, default=str))
    else:
        print(f"error: [{err.code}] {' '.join(err.message.split())}", file=sys.stderr)
    return 2


async def cmd_runs_tail(args: argparse.Namespace) -> int:
    """Print a run's step stream, one JSON chunk a line, until the writing step settles.
    Exit 1, saying so, when there was nothing to print (a misspelled stream, say)."""
    printed = False
    shown: set[str] = set()  # steps with a line printed since their last restart
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        async for chunk in client.stream(
            args.run_id, args.stream, start=args.start, follow=not args.no_follow
        ):
            if chunk.kind == "restart":
                said = f"# step {chunk.step_id} restarted (attempt {chunk.attempt})"
                if args.show_index:
                    said = f"{chunk.index}\t{said}"
                if chunk.step_id in shown:  # not when --start skipped all of them
                    said += ": the lines above from it were partial"
                    shown.discard(chunk.step_id)
                print(said, file=sys.stderr, flush=True)
                continue
            line = json.dumps(chunk.data, default=str)
            # the index is what --start takes; only under the flag, so a line stays one JSON
            # value for a script that reads the stream's records
            print(f"{chunk.index}\t{line}" if args.show_index else line, flush=True)
            printed = True
            shown.add(chunk.step_id)
    if not printed:
        where = f" from index {args.start}" if args.start else ""
        print(
            f"error: run {args.run_id} has nothing in stream {args.stream!r}{where}",
            file=sys.stderr,
        )
        return 1
    return 0


async def cmd_runs_wake(args: argparse.Namespace) -> int:
    """``Client.wake_up``: fire pending sleeps now; exit 1 when there was nothing to wake, 2
    for a wait the run does not have (bad input, as an unknown run)."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        try:
            woken = await client.wake_up(args.run_id, wait=args.wait)
        except WaylineError as err:
            print(f"error: {err.message}", file=sys.stderr)
            if "has no pending wait" not in err.message:
                return 1  # the run has ended: nothing to wake
            # a wait the run had and that has fired is nothing to do; one it never had is
            # bad input, as an unknown run is
            return 1 if await _had_wait(world, args.run_id, args.wait) else 2
    if not woken:
        print(f"error: run {args.run_id} has no pending sleep; nothing to wake", file=sys.stderr)
        return 1
    print(f"woke {', '.join(woken)} of {args.run_id}")
    return 0


async def _had_wait(world: World, run_id: str, wait: str | None) -> bool:
    """The run created the wait ``wait`` (a sleep, a child's deadline or a hook's timeout),
    pending or not."""
    if wait is None:
        return False
    view = fold(run_id, await world.list_events(run_id))
    hook = view.hooks.get(timeout_of(wait))
    return wait in view.waits or (hook is not None and hook.timeout_at is not None)


def stuck(info: RunInfo) -> bool:
    return info.status is RunStatus.COMPENSATION_STUCK


async def cmd_runs_cancel(args: argparse.Namespace) -> int:
    """Cancelling is a request: a worker stops the run, compensates its completed steps (if
    they have compensations) and records ``run_cancelled``. ``--wait`` waits for that."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        before = await _get_run(client, args.run_id, args.world)
        if before.status.terminal:  # nothing to do: exit 1, as every verb (docs/cli.md)
            print(
                f"error: run {args.run_id} already ended ({before.status}); nothing to cancel",
                file=sys.stderr,
            )
            return 1
        if not await client.cancel(args.run_id, reason=args.reason):
            info = await client.get_run(args.run_id)  # it ended in between
            print(
                f"error: run {args.run_id} ended ({info.status}) before the cancel landed; "
                "nothing to cancel",
                file=sys.stderr,
            )
            return 1
        info = await client.get_run(args.run_id)
        deadline = time.monotonic() + (args.wait or 0.0)
        # a stuck unwind ends only by a person's decision: no worker ends it meanwhile
        while not info.status.terminal and time.monotonic() < deadline and not stuck(info):
            await asyncio.sleep(0.05)
            info = await client.get_run(args.run_id)
    if info.status is RunStatus.CANCELLED:
        print(f"cancelled {args.run_id}")
        return 0
    if info.status.terminal:
        print(f"run {args.run_id} ended {info.status} instead: {fmt_error(info.error)}")
        return 1
    if stuck(info):
        url = absolute_world_url(args.world)
        print(
            f"{'error: ' if args.wait else ''}cancel of {args.run_id} requested, but it is "
            "compensation_stuck (wayline runs show says why): no worker ends it until a "
            f"person decides: wayline runs resume-compensation {args.run_id} --world {url} "
            f"(try again), or wayline runs abandon-compensation {args.run_id} --world {url}",
            file=sys.stderr if args.wait else sys.stdout,
        )
        return 1 if args.wait else 0
    if args.wait:
        print(
            f"error: cancel of {args.run_id} requested, but it is still {info.status} after "
            f"{args.wait:g}s (is a worker running?)",
            file=sys.stderr,
        )
        return 1
    print(
        f"cancel requested for {args.run_id} (now {info.status}); a worker stops it and runs "
        "its compensations"
    )
    return 0


async def cmd_runs_terminate(args: argparse.Namespace) -> int:
    """Stop a run now, without its compensations: it ends cancelled at once (no worker
    needed). Exit 1 when it had already ended otherwise."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        before = await _get_run(client, args.run_id, args.world)
        if before.status.terminal or not await client.terminate(args.run_id, args.reason):
            info = await client.get_run(args.run_id)
            print(
                f"error: run {args.run_id} already ended ({info.status}); nothing to terminate",
                file=sys.stderr,
            )
            return 1
    print(f"terminated {args.run_id} (no compensations ran)")
    return 0


async def cmd_runs_watch(args: argparse.Namespace) -> int:
    """The run's live timeline (its whole history first) until it ends; exit 0 completed,
    1 failed or cancelled."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        progress = LiveProgress(sys.stdout, absolute_world_url(args.world))
        await follow(world, args.run_id, progress, poll=args.poll)
        info = await client.get_run(args.run_id)
    return 0 if info.status is RunStatus.COMPLETED else 1


async def cmd_runs_fail(args: argparse.Namespace) -> int:
    """End a live run failed (``TERMINATED``) without compensations: exit 1 if it had ended."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        if not await client.fail(args.run_id, reason=args.reason):
            info = await client.get_run(args.run_id)
            print(
                f"error: run {args.run_id} already ended ({info.status}); nothing to fail",
                file=sys.stderr,
            )
            return 1
    print(f"failed {args.run_id}: {args.reason}")
    return 0


async def cmd_runs_compensation(args: argparse.Namespace) -> int:
    """``resume-compensation`` / ``abandon-compensation`` of a ``compensation_stuck`` run."""
    async with opened_world(args.world, create=False) as world:
        client = await run_client(world, args)
        await _get_run(client, args.run_id, args.world)
        try:
            if args.action == "resume":
                done = await client.resume_compensation(args.run_id)
                not_run = None
            else:
                abandonment = await client.abandon_compensation(args.run_id)
                done, not_run = abandonment.recorded, abandonment.not_run
        except WaylineError as err:
            if type(err) is not WaylineError:  # a world's or the log's error: as any command
                raise
            # the client's plain error: the run is not (or no longer) compensation_stuck, or
            # its unwind was abandoned; there is nothing to resume or abandon
            print(f"error: {err.message}", file=sys.stderr)
            return 1
    if not done:
        print(
            f"error: the compensation of {args.run_id} was abandoned already; nothing to abandon",
            file=sys.stderr,
        )
        return 1
    if args.action == "resume":
        print(f"compensation of {args.run_id} resumed: a worker tries the reversal again")
    else:
        print(abandoned_text(args.run_id, not_run))
    return 0


# --- hooks ----------------------------------------------------------------------------------
async def cmd_hooks_list(args: argparse.Namespace) -> int:
    """The hooks live runs hold, with the token a person answers (received: it had a
    payload and keeps its token)."""
    async with opened_world(args.world, create=False) as world:
        client = Client(world)
        if args.run is not None:
            await _get_run(client, args.run, args.world)
        hooks = await client.open_hooks(args.run)
    if args.json:
        print(json.dumps(hooks, indent=2, default=str))
        return 0
    if not hooks:
        print("no hook is waiting")
        return 0
    rows = [["TOKEN", "RUN", "WORKFLOW", "STATUS", "WAITING SINCE", "TIMES OUT", "METADATA"]]
    for hook in hooks:
        rows.append(
            [
                str(hook["token"]),
                str(hook["runId"]),
                str(hook["workflow"]),
                str(hook["status"]),
                fmt_time(hook["createdAt"]),
                fmt_time(hook["timeoutAt"]),
                "" if hook["metadata"] is None else fmt_json(hook["metadata"], 60),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def duration_option(value: str, option: str) -> float:
    """A duration option (``10m``, ``90s``, ``1h30m``) in seconds; bad input is refused."""
    try:
        seconds = to_seconds(value)
    except ValueError as err:
        raise UsageError(f"{option}: {err}") from None
    if not 0 < seconds <= MAX_BUFFER_SECONDS:
        raise UsageError(f"{option} is more than 0 and at most 7d, not {value!r}")
    return seconds


async def cmd_hooks_resume(args: argparse.Namespace) -> int:
    _, payload = option_json(args.payload, "--payload")
    buffer = None if args.buffer is None else duration_option(args.buffer, "--buffer")
    async with opened_world(args.world, create=False) as world:
        try:
            client = Client(world)
            if buffer is None:
                run_id = await client.resume_hook(args.token, payload, delivery_id=args.delivery_id)
            else:
                found = await client.resume_hook(
                    args.token, payload, delivery_id=args.delivery_id, buffer=buffer
                )
                if found is None:
                    print(
                        f"buffered a payload for hook {args.token} for {args.buffer}: the "
                        "first hook a run creates for it receives it"
                    )
                    return 0
                run_id = found
        except HookNotFoundError as err:
            if not err.details.get("known"):  # no hook ever held the token: bad input
                raise UsageError(f"{err.message} (in {args.world})") from None
            # answered, disposed, or its run ended: nothing to resume
            print(f"error: {err.message}; nothing to resume", file=sys.stderr)
            return 1
    print(f"resumed hook {args.token} of run {run_id}")
    return 0
