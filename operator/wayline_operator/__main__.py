"""``python -m wayline_operator [--namespace NS ...] [--peering NAME]``: run the operator.
``python -m wayline_operator crds [DIR]``: write the CRDs (to ``crds/`` by default).

More than one replica: give them one ``--peering`` name (``WAYLINE_OPERATOR_PEERING``; its
KopfPeering, or ClusterKopfPeering when no namespace is listed, must exist: see
``crds/kopf-peering.json`` and docs/operator.md). The replica with the highest
``--priority`` works, the others stand by; one that stops renewing its peering entry for
``--peering-lifetime`` seconds is presumed dead and the next one takes over. Replicas must not
share a priority (kopf pauses all of them then): without ``--priority`` each replica draws a
random one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["crds"]:
        from pathlib import Path

        from .resource import as_json, crds

        folder = Path(args[1] if len(args) > 1 else "crds")
        for name, manifest in crds().items():
            (folder / name).write_text(as_json(manifest))
            print(folder / name)
        return 0
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m wayline_operator")
    parser.add_argument("--namespace", action="append", default=[], help="watch only these")
    parser.add_argument(
        "--peering",
        default=env.get("WAYLINE_OPERATOR_PEERING") or None,
        help="a (Cluster)KopfPeering name, for more than one replica (WAYLINE_OPERATOR_PEERING)",
    )
    parser.add_argument(
        "--priority",
        type=int,
        default=int(env["WAYLINE_OPERATOR_PRIORITY"])
        if env.get("WAYLINE_OPERATOR_PRIORITY")
        else None,
        help="this replica's peering priority, highest works (default: a random one)",
    )
    parser.add_argument(
        "--peering-lifetime",
        type=int,
        default=int(env.get("WAYLINE_OPERATOR_PEERING_LIFETIME", "60")),
        metavar="SECONDS",
        help="how long a silent replica is presumed alive (default 60)",
    )
    parser.add_argument("--metrics-port", type=int, metavar="PORT", help="serve /metrics here")
    parser.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDRESS")
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument("--verbose", action="store_true")
    opts = parser.parse_args(args)

    from wayline import logs, metrics, telemetry

    logs.configure(logging.DEBUG if opts.verbose else logging.INFO, opts.log_format)
    log = logging.getLogger("wayline.operator")
    import kopf

    from . import handlers  # noqa: F401 - registers the handlers

    settings = kopf.OperatorSettings()
    priority = opts.priority
    if opts.peering is not None:
        settings.peering.lifetime = opts.peering_lifetime
        if priority is None:
            priority = random.SystemRandom().randint(1, 2**31 - 1)
        log.info(
            "peering %r with priority %d (lifetime %ds)",
            opts.peering,
            priority,
            opts.peering_lifetime,
        )
    server = None
    if opts.metrics_port is not None:
        server = metrics.serve(opts.metrics_port, opts.metrics_host)
        log.info("metrics on http://%s:%d/metrics", opts.metrics_host, server.server_port)
    shutdown_traces = telemetry.configure("wayline-operator")
    try:
        asyncio.run(
            kopf.operator(
                settings=settings,
                clusterwide=not opts.namespace,
                namespaces=opts.namespace,
                standalone=opts.peering is None,
                peering_name=opts.peering,
                priority=priority,
            )
        )
    finally:
        shutdown_traces()
        if server is not None:
            server.shutdown()
            server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
