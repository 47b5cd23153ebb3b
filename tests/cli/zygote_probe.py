"""Run by tests/cli/test_cli_zygote.py as ``python -m tests.cli.zygote_probe MODE``, once as a
new interpreter and once forked from the CLI zygote: what it prints and how it ends must be
the same either way."""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time

mode = sys.argv[1]
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "mark": os.environ.get("PROBE_MARK")}))
if mode == "partial":  # half a line on each stream, then an exit that flushes nothing
    sys.stdout.write("half a line out")
    sys.stderr.write("half a line err")
    os._exit(0)
if mode == "random":  # what a process draws first: each child must draw its own
    import random
    import uuid

    print("random:", random.getrandbits(64), uuid.uuid4().hex)
if mode == "codec":  # the codec wayline.settings picked when it was imported
    from wayline._core import jsoncodec

    print("codec:", jsoncodec.NAME)
print("stdin:", sys.stdin.read().strip())
print("to stderr", file=sys.stderr)
atexit.register(lambda: print("atexit ran", flush=True))
if mode == "thread":  # a non-daemon thread outlives the module: the exit waits for it
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread ended", flush=True))).start()
elif mode == "message":
    sys.exit("refused: a message")
elif mode == "code":
    sys.exit(3)
elif mode == "raise":
    raise ValueError("boom")
elif mode == "interrupt":  # what SIGINT's default handler raises
    raise KeyboardInterrupt
