"""Log set-up for the worker and the operator: text (the default) or one JSON object a line.

Records carry ``run_id`` and ``step`` when they concern one: passed as ``extra``, or bound for
a whole delivery with :func:`bound` (the worker binds the run id of each message it handles).
JSON lines have ``time``, ``level``, ``logger``, ``message``, those fields when present,
``object`` (kind, namespace, name) for the operator's per-resource records, and ``exception``
for a logged traceback.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = ("run_id", "step", "step_id", "attempt", "workflow")

_bound: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "wayline_log_fields", default=None
)


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add these fields (``run_id``, ``step`` ...) to every record logged inside."""
    merged = {**(_bound.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _bound.set(merged)
    try:
        yield
    finally:
        _bound.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in (_bound.get() or {}).items():
            out.setdefault(key, value)
        for key in FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                out[key] = value
        ref = record.__dict__.get("k8s_ref")  # kopf's per-object records
        if isinstance(ref, dict) and ref.get("name"):
            out["object"] = {k: ref[k] for k in ("kind", "namespace", "name") if ref.get(k)}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


_SSL_EOF = "returning true from eof_received() has no effect when using ssl"


def _not_benign(record: logging.LogRecord) -> bool:
    """Drop asyncio's warning that a TLS connection the peer closed cannot stay half-open.
    The NATS client reads through asyncio streams on a connection it upgrades to TLS after the
    server's greeting; the stream's protocol, made for a plain connection, asks to keep it
    half-open at EOF, and asyncio says over TLS it cannot and closes it, as was wanted. Nothing
    is lost, yet every TLS connection closed by the server printed it (``wayline runs list``
    at each exit)."""
    return not (record.name == "asyncio" and record.getMessage() == _SSL_EOF)


def configure(
    level: int | str = logging.INFO, fmt: str = "text", stream: TextIO | None = None
) -> None:
    """Configure the root logger (replacing handlers a previous call installed)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(_not_benign)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_wayline", False):
            root.removeHandler(old)
    handler._wayline = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
