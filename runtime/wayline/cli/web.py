"""``wayline console``: serve the web console and its HTTP API over one world
(docs/console.md). The web framework is an optional extra, imported only when the command
runs, so every other command works without it."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from pathlib import Path

from .._sdk.webhooks import check_secrets
from ..client import Client
from ..errors import ConfigurationError
from ..settings import Settings
from .commands import absolute_world_url, opened_world
from .loading import UsageError, import_app, port_arg, range_arg


def read_token(path: str | None) -> str | None:
    """The bearer token actions need, from a file (a mounted Secret); None: read-only."""
    if path is None:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"--token-file {path!r} cannot be read: {err}") from None
    if len(token) < 16:
        # a short token is guessed: refuse it rather than serve actions behind it
        raise UsageError(f"--token-file {path!r} holds a token of fewer than 16 characters")
    return token


def webhook_secrets() -> tuple[str, ...]:
    """The keys that verify webhook URLs (WAYLINE_WEBHOOK_SECRET or its file); none: every
    webhook is refused. A key too short to be safe stops the console at start."""
    try:
        secrets = Settings.from_env().webhook_secrets
        if secrets:
            check_secrets(secrets, "the console")
    except ConfigurationError as err:
        raise UsageError(err.message) from None
    return secrets


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")


def allowed_hosts(host: str, given: list[str] | None) -> list[str] | None:
    """The ``Host`` names the console answers: those given with ``--allowed-host``; else, on
    a loopback address, the loopback names alone (a page elsewhere cannot reach it through a
    name of its own); else any (a pod behind an Ingress, whose names the console cannot
    know)."""
    if given:
        return given
    return list(LOOPBACK_NAMES) if host in LOOPBACK_NAMES else None


def _bind(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server((host, port))
    except OSError as err:
        raise UsageError(f"--port {port}: cannot listen on {host}:{port}: {err}") from None


async def cmd_console(args: argparse.Namespace) -> int:
    try:
        from .console import create_app, serve
    except ImportError as err:
        raise UsageError(
            f"the console needs the console extra: pip install 'wayline[console]' ({err})"
        ) from None
    token = read_token(args.token_file)
    secrets = webhook_secrets()
    if args.reads_need_token and token is None:
        raise UsageError("--reads-need-token needs --token-file (the token reads then need)")
    for spec in args.app or ():
        # the application's own modules, imported here by the person who started the console:
        # its typed hooks are then validated with their classes; a hook's recorded type never
        # makes the console import a module (create_app)
        import_app(spec)
    sock = _bind(args.host, args.port)
    async with opened_world(args.world, create=False, wait_seconds=args.wait_seconds) as world:
        # the world's own URL hides a password the given one may hold (a pod's NATS URL
        # does): the console shows it on every page and prints it to the log
        url = world.url or absolute_world_url(args.world)
        closing = asyncio.Event()
        app = create_app(
            Client(world),
            world_url=url,
            token=token,
            closing=closing,
            max_body_bytes=args.max_body_bytes,
            schedules_file=Path(args.schedules_file),
            allowed_hosts=allowed_hosts(args.host, args.allowed_host),
            webhook_secrets=secrets,
            read_only=args.read_only,
            reads_need_token=args.reads_need_token,
        )
        host, port = sock.getsockname()[:2]
        mode = "read-only" if token is None or args.read_only else "actions need the token"
        if args.reads_need_token:
            mode += ", reads need the token"
        print(f"wayline console on http://{host}:{port}/ ({mode}), world {url}", file=sys.stderr)
        await serve(app, sock, closing)
    return 0


def add_console(sub: argparse._SubParsersAction, command: object) -> None:  # type: ignore[type-arg]
    p = command(  # type: ignore[operator]
        sub,
        "console",
        "serve the web console and its HTTP API (read-only unless --token-file is given)",
    )
    p.add_argument("--port", type=port_arg, default=8233, help="default 8233 (0: any free one)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the address to listen on (default 127.0.0.1; in a pod, 0.0.0.0)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host name the console answers (repeatable); default: the loopback names when "
        "--host is a loopback address, else any",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding the bearer token that cancel, terminate, start and hook resumes "
        "need (at least 16 characters); without it the console is read-only",
    )
    p.add_argument(
        "--wait-seconds",
        type=range_arg(0, 3600),
        default=0,
        metavar="N",
        help="how long a NATS world that cannot be reached yet is tried again (a pod starting "
        "before its NATS; default 0: fail at once)",
    )
    p.add_argument(
        "--app",
        action="append",
        metavar="MODULE",
        help="a module (or .py file) of the application, imported at start (repeatable): its "
        "typed hooks' payloads are checked with their classes; any other hook is checked "
        "against the shape its log recorded, and the console never imports a module a log names",
    )
    p.add_argument(
        "--read-only",
        action="store_true",
        help="refuse every action (403 READ_ONLY) even with --token-file, whose token then "
        "serves --reads-need-token alone",
    )
    p.add_argument(
        "--reads-need-token",
        action="store_true",
        help="every API request, reads included, needs the --token-file token (401 without "
        "it); /healthz and the pages' files stay open",
    )
    p.add_argument(
        "--max-body-bytes",
        type=range_arg(1024, 64 * 1024 * 1024),
        default=1024 * 1024,
        metavar="N",
        help="the largest request body read (default 1 MiB; a start's input or a hook "
        "payload over it is refused with PAYLOAD_TOO_LARGE)",
    )
    p.add_argument(
        "--schedules-file",
        default=".wayline/schedules.json",
        metavar="PATH",
        help="the file of `wayline schedules` whose schedules the schedules page shows "
        "(default .wayline/schedules.json)",
    )
    p.set_defaults(handler=cmd_console)
