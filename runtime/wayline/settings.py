"""Every tunable in one typed object, read from one injectable mapping.

Environment variables are read here and nowhere else, so a test can pass its own mapping
instead of touching ``os.environ``. The seed's names stand as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ConfigurationError

# Seed 000, "Why a fixed constant, and why 860 seconds": longer than any invocation may live
# (Wayline's workers enforce WAYLINE_MAX_INVOCATION_SECONDS=800 below it), and under the
# 900 s ceiling so a single delayed backstop always suffices.
DEFAULT_LEASE_SECONDS = 860.0
MAX_LEASE_SECONDS = 900.0


@dataclass(frozen=True, slots=True)
class Settings:
    inline_ownership: bool = True
    """``WORKFLOW_INLINE_OWNERSHIP``: 0/false is the kill switch (dispatch only; stamping stays)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS
    """``WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS``, seconds, clamped to 1..900 (seed 000)."""

    max_queue_deliveries: int = 48
    """``WORKFLOW_MAX_QUEUE_DELIVERIES``: a flow delivery beyond this attempt fails the run
    (``MAX_DELIVERIES_EXCEEDED``) instead of crash-looping forever. 48 as the reference."""

    max_inline_steps: int = 3
    """``WORKFLOW_MAX_INLINE_STEPS``, 1..16: new steps run lazily inline per suspension; the
    rest are created eagerly and queued. 3 as the reference runtime."""

    max_invocation_seconds: float = 800.0
    """``WAYLINE_MAX_INVOCATION_SECONDS``: the kill bound a worker enforces on one delivery, so
    that a lease longer than it proves the owner dead. Must stay below the lease."""

    handoff_seconds: float | None = None
    """``WAYLINE_HANDOFF_SECONDS``: a run driven this long under one delivery is handed off at
    its next step boundary (ack + continue under a new message). Default: half of
    ``max_invocation_seconds``; must be below it."""

    visibility_seconds: float = 30.0
    """``WAYLINE_VISIBILITY_SECONDS``: how long a held delivery stays invisible without a
    renewal. Workers renew every third of it; a dead worker's delivery returns after it."""

    poll_interval_seconds: float = 0.05
    """``WAYLINE_POLL_INTERVAL``: how often an idle consumer re-checks a store that cannot
    notify other processes (SQLite). In-process enqueues wake consumers at once."""

    definition_mismatch: str = "wait"
    """``WAYLINE_DEFINITION_MISMATCH``: ``wait`` (a run whose recorded definition identity this
    worker lacks is marked blocked and left for a matching worker) or ``fail`` (it fails with
    ``DEFINITION_MISMATCH``). Never: drive it with another definition."""

    world_url: str = "sqlite:///.wayline/wayline.db"
    """``WAYLINE_WORLD``: the default world for the CLI and ``open_world``."""

    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def handoff_after(self) -> float:
        if self.handoff_seconds is not None:
            return self.handoff_seconds
        return self.max_invocation_seconds / 2

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        lease = _float(env, "WORKFLOW_INLINE_OWNERSHIP_LEASE_SECONDS", DEFAULT_LEASE_SECONDS)
        lease = min(MAX_LEASE_SECONDS, max(1.0, lease))
        return cls(
            inline_ownership=_flag(env, "WORKFLOW_INLINE_OWNERSHIP", True),
            lease_seconds=lease,
            max_queue_deliveries=max(1, int(_float(env, "WORKFLOW_MAX_QUEUE_DELIVERIES", 48))),
            max_inline_steps=min(16, max(1, int(_float(env, "WORKFLOW_MAX_INLINE_STEPS", 3)))),
            max_invocation_seconds=_float(env, "WAYLINE_MAX_INVOCATION_SECONDS", 800.0),
            handoff_seconds=_float(env, "WAYLINE_HANDOFF_SECONDS", 0.0) or None,
            visibility_seconds=max(0.5, _float(env, "WAYLINE_VISIBILITY_SECONDS", 30.0)),
            poll_interval_seconds=max(0.001, _float(env, "WAYLINE_POLL_INTERVAL", 0.05)),
            definition_mismatch=_choice(env, "WAYLINE_DEFINITION_MISMATCH", ("wait", "fail")),
            world_url=env.get("WAYLINE_WORLD") or "sqlite:///.wayline/wayline.db",
        )


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ConfigurationError(f"{name} must be 0/1/true/false, got {raw!r}")


def _choice(env: Mapping[str, str], name: str, options: tuple[str, ...]) -> str:
    raw = (env.get(name) or options[0]).strip().lower()
    if raw not in options:
        raise ConfigurationError(f"{name} must be one of {', '.join(options)}, got {raw!r}")
    return raw


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from None
