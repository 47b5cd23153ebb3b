"""``python -m wayline_operator [--namespace NS ...] [--peering NAME] [--liveness URL]``: run
the operator.
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
import getpass
import ipaddress
import logging
import os
import random
import socket
import sys
import urllib.parse
from collections.abc import Sequence

from .config import settings as wayline_settings
from .instance import DEFAULT_INSTANCE, instance_arg


def identity() -> str:
    """This operator's peering identity: the pod's name (``POD_ID``, set by the chart from the
    downward API), else ``user@host/pid``. kopf's own default asks ``getpass.getuser()``, which
    raises ``KeyError`` for a uid with no passwd entry and no ``USER``/``LOGNAME`` (the
    chart's image runs as 65532): the operator would crash at start."""
    pod = wayline_settings().operator_identity
    if pod:
        return pod
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, no USER/LOGNAME/LNAME/USERNAME
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}/{os.getpid()}"


def liveness_url(text: str) -> str:
    """``--liveness`` (argparse ``type=``): an ``http://`` URL whose port, if any, is 0 to
    65535. kopf reads it only once the operator runs, where a bad one failed its health
    reporter with a traceback. An IPv6 address written without brackets (the chart's
    ``http://$(POD_IP):PORT/...`` on an IPv6 cluster) is given its brackets."""
    text = _bracketed(text)
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises for a port out of 0-65535 or not a number
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} in {text!r}") from None
    if parts.scheme != "http":
        raise argparse.ArgumentTypeError(f"kopf serves http:// only, got {text!r}")
    return text


def _bracketed(text: str) -> str:
    """``http://fd00::5:8080/h`` as ``http://[fd00::5]:8080/h``; anything else as it is."""
    scheme, sep, rest = text.partition("://")
    netloc, slash, path = rest.partition("/")
    if not sep or "[" in netloc or netloc.count(":") < 2:
        return text
    host, _, port = netloc.rpartition(":")
    for candidate, tail in ((host, f":{port}"), (netloc, "")):
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        return f"{scheme}://[{candidate}]{tail}{slash}{path}"
    return text


API_SERVER_JSON_DEPTH = 10_000
"""How deep the API server nests the JSON it accepts (its decoder's limit)."""


def deep_json() -> None:
    """Read whatever the API server stores. Python's json recurses once per level and gives up
    at the interpreter's recursion limit (1,000): one WorkflowRun or WorkflowHook nested deeper
    (the API server takes 10,000 levels) failed kopf's watch stream, which stopped the whole
    operator, and again after every restart. Decoding, copying and encoding such a body takes
    a few frames per level; 10,000 levels take about 3 MiB of an 8 MiB stack."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 6 * API_SERVER_JSON_DEPTH))


def _no_cluster() -> str | None:
    """Why the operator has no credentials for an API server (in-cluster, else a kubeconfig,
    as kopf and ``kube`` look), or None. Said in one line before kopf starts: kopf's own
    login failure is a page of tracebacks."""
    import kubernetes

    from . import kube

    try:
        kube.custom_objects()
    except kubernetes.config.ConfigException as err:
        return (
            f"not in a cluster, and no kubeconfig: {err} (KUBECONFIG, else ~/.kube/config, "
            "names the cluster, as for kubectl)"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["crds"]:
        from pathlib import Path

        from .resource import as_json, crds

        folder = Path(args[1] if len(args) > 1 else "crds")
        written: list[Path] = []
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, manifest in crds().items():
                (folder / name).write_text(as_json(manifest))
                written.append(folder / name)
        except OSError as err:
            print(f"error: cannot write the CRDs to {str(folder)!r}: {err}", file=sys.stderr)
            return 2
        for path in written:
            print(path)
        return 0
    from wayline.arguments import UsageParser, port_arg, range_arg
    from wayline.settings import PEERING_LIFETIME_RANGE, PRIORITY_RANGE

    conf = wayline_settings()
    parser = UsageParser(
        prog="python -m wayline_operator",
        epilog="python -m wayline_operator crds [DIR]: write the CRDs (to crds/ by default)",
    )
    parser.add_argument("--namespace", action="append", default=[], help="watch only these")
    parser.add_argument(
        "--instance",
        type=instance_arg,
        default=conf.operator_instance or DEFAULT_INSTANCE,
        help="this operator's instance id: it owns the resources labelled "
        "wayline.dev/instance=ID and, watching --namespace, the unlabelled ones there "
        "(WAYLINE_OPERATOR_INSTANCE; default: default)",
    )
    parser.add_argument(
        "--peering",
        default=conf.operator_peering,
        help="a (Cluster)KopfPeering name, for more than one replica (WAYLINE_OPERATOR_PEERING)",
    )
    parser.add_argument(
        "--priority",
        type=range_arg(*PRIORITY_RANGE),
        default=conf.operator_priority,
        help="this replica's peering priority, highest works (default: a random one)",
    )
    parser.add_argument(
        "--peering-lifetime",
        type=range_arg(*PEERING_LIFETIME_RANGE),
        default=conf.operator_peering_lifetime,
        metavar="SECONDS",
        help="how long a silent replica is presumed alive (default 60)",
    )
    parser.add_argument(
        "--liveness",
        metavar="URL",
        type=liveness_url,
        help="kopf's liveness endpoint, e.g. http://0.0.0.0:8080/healthz (the chart's probe)",
    )
    parser.add_argument("--metrics-port", type=port_arg, metavar="PORT", help="serve /metrics here")
    parser.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDRESS")
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    parser.add_argument("--verbose", action="store_true")
    opts = parser.parse_args(args)

    from wayline import logs, metrics, telemetry

    reason = _no_cluster()
    if reason is not None:
        print(f"error: no Kubernetes API server to work with: {reason}", file=sys.stderr)
        return 2
    logs.configure(logging.DEBUG if opts.verbose else logging.INFO, opts.log_format)
    # kopf's liveness endpoint is aiohttp's: one access line per probe (every 10 s from the
    # chart's livenessProbe) said nothing but that the kubelet asked.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    log = logging.getLogger("wayline.operator")
    import kopf

    from . import (  # noqa: F401 - registers the handlers
        collector,
        handlers,
        schedule_handlers,
        worker_handlers,
    )
    from .instance import Ownership, configure

    configure(Ownership(opts.instance, namespaced=bool(opts.namespace)))
    log.info(
        "instance %r: owns WorkflowRuns labelled %s=%s%s",
        opts.instance,
        "wayline.dev/instance",
        opts.instance,
        " and the unlabelled ones of " + ", ".join(opts.namespace) if opts.namespace else "",
    )

    os.environ["POD_ID"] = identity()  # kopf's documented override of its peering identity
    settings = kopf.OperatorSettings()
    priority = opts.priority
    if opts.peering is not None:
        from .peering import follow_kopf

        follow_kopf()  # the status pump and the sweep pause when kopf pauses this replica
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
    shutdown_traces = telemetry.configure("wayline-operator", conf.otel_env)
    collector.tune()  # long full collections would hold every status write (``collector``)
    deep_json()
    try:
        asyncio.run(
            kopf.operator(
                settings=settings,
                clusterwide=not opts.namespace,
                namespaces=opts.namespace,
                standalone=opts.peering is None,
                peering_name=opts.peering,
                priority=priority,
                liveness_endpoint=opts.liveness,
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
