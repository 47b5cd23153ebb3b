"""Cron expressions, public: what a schedule (the CLI's, the operator's WorkflowSchedule) is
parsed into, and when it comes due."""

from __future__ import annotations

from ._core.cron import Cron, CronError, due, next_tick, parse

__all__ = ["Cron", "CronError", "due", "next_tick", "parse"]
