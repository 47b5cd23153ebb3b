"""Typed identifiers. Run ids are ``wf_`` + 128 random bits (seed 004)."""

from __future__ import annotations

import re
import secrets
from typing import NewType

RunId = NewType("RunId", str)
CorrelationId = NewType("CorrelationId", str)
MessageId = NewType("MessageId", str)

_RUN_ID = re.compile(r"^wf_[0-9a-f]{32}$")


def new_run_id() -> RunId:
    return RunId("wf_" + secrets.token_hex(16))


def is_run_id(value: str) -> bool:
    return bool(_RUN_ID.match(value))
