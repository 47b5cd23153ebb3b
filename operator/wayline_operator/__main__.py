"""``python -m wayline_operator [--namespace NS ...] [--peering NAME] [--liveness URL]``: run
the operator.
``python -m wayline_operator crds [DIR]``: write the CRDs (to ``crds/`` by default)."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import os
import socket
import sys
from collections.abc import Sequence


def identity() -> str:
    """This operator's peering identity: the pod's name (``POD_ID``, set by the chart from the
    downward API), else ``user@host/pid``. kopf's own default asks ``getpass.getuser()``, which
    raises ``KeyError`` for a uid with no passwd entry and no ``USER``/``LOGNAME`` (the
    chart's image runs as 65532): the operator would crash at start."""
    from .config import settings

    pod = settings().operator_identity
    if pod:
        return pod
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, no USER/LOGNAME/LNAME/USERNAME
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}/{os.getpid()}"


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
    parser = argparse.ArgumentParser(prog="python -m wayline_operator")
    parser.add_argument("--namespace", action="append", default=[], help="watch only these")
    parser.add_argument("--peering", help="a KopfPeering name, for more than one replica")
    parser.add_argument(
        "--liveness",
        metavar="URL",
        help="kopf's liveness endpoint, e.g. http://0.0.0.0:8080/healthz (the chart's probe)",
    )
    parser.add_argument("--verbose", action="store_true")
    opts = parser.parse_args(args)
    logging.basicConfig(
        level=logging.DEBUG if opts.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    import kopf

    from . import handlers  # noqa: F401 - registers the handlers

    os.environ["POD_ID"] = identity()  # kopf's documented override of its peering identity

    asyncio.run(
        kopf.operator(
            clusterwide=not opts.namespace,
            namespaces=opts.namespace,
            standalone=opts.peering is None,
            peering_name=opts.peering,
            liveness_endpoint=opts.liveness,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
