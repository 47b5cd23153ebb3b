"""Run by tests/operator/test_zygote.py as ``python -m tests.operator.zygote_probe``, forked
from the zygote: prints what the child sees of its environment and the codec ``wayline`` picked when
imported, then waits to be signalled."""

from __future__ import annotations

import json
import os
import sys
import time

from kubernetes.config import kube_config

from wayline._core import jsoncodec

print(
    json.dumps(
        {
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "mark": os.environ.get("ZYGOTE_PROBE_MARK"),
            "kubeconfig": kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
            "codec": jsoncodec.NAME,
        }
    ),
    flush=True,
)
if "--wait" in sys.argv:
    time.sleep(120)
