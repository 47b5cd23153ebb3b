"""``wayline doctor``: can this process use the world, and does its store fsync what it
acknowledges (``World.checkup``)."""

from __future__ import annotations

import argparse

from ..settings import Settings
from ..world.open import open_world
from .loading import UsageError


async def cmd_doctor(args: argparse.Namespace) -> int:
    """One line per check (``ok``, ``warn`` or ``fail``). Exit 1 when a check failed (or, with
    ``--strict``, warned): the world cannot be used as it is; 2 for bad input."""
    world = open_world(args.world)  # a malformed URL is bad input (exit 2)
    nats = args.world.partition("://")[0] in ("nats", "tls")
    if args.monitor and not nats:
        raise UsageError(
            "--monitor names a NATS server's monitoring endpoint; this world is not on NATS"
        )
    monitors = args.monitor or (Settings.from_env().nats_monitors if nats else ())
    findings = await world.checkup(monitors)  # bad monitoring URLs raise first (exit 2)
    print(f"world {world.url}")
    for finding in findings:
        print(finding.line())
    bad = {"fail", "warn"} if args.strict else {"fail"}
    return 1 if any(f.level in bad for f in findings) else 0


def add_doctor(sub: argparse._SubParsersAction, command: object) -> None:  # type: ignore[type-arg]
    p = command(  # type: ignore[operator]
        sub,
        "doctor",
        "check the world: reachability, authentication, TLS, JetStream limits, and whether its "
        "store fsyncs a write before acknowledging it",
    )
    p.add_argument(
        "--monitor",
        action="append",
        metavar="URL",
        help="a NATS server's monitoring endpoint (http://HOST:8222), which alone tells its "
        "sync setting; repeatable, one per node (default: $WAYLINE_NATS_MONITOR, else port "
        "8222 of the server connected to, if it answers there)",
    )
    p.add_argument(
        "--strict", action="store_true", help="exit 1 on a warning too, as on a failed check"
    )
    p.set_defaults(handler=cmd_doctor)
