"""The operator's settings: read once, through ``wayline.settings`` (the only reader of the
environment), when the handlers module is imported: the cadences are the same for the
operator's whole life.

- ``WAYLINE_WORLD``: the world URL (``nats://…`` in a cluster), as for every wayline command;
- ``WAYLINE_OPERATOR_STATUS_INTERVAL_SECONDS`` (1), ``..._PATCHES_PER_SECOND`` (100),
  ``..._RESYNC_SECONDS`` (300), ``..._CHANGE_FEED`` (on): the status pump's cadence;
- ``WAYLINE_OPERATOR_SWEEP_SECONDS`` (60): how often runs with no wake coming are re-armed;
- ``WAYLINE_OPERATOR_HOOK_RETRY_SECONDS`` (5): how often a WorkflowHook whose run has not
  reached its hook yet tries again;
- ``WAYLINE_OPERATOR_SCHEDULE_SECONDS`` (10): how often each WorkflowSchedule is looked at.
"""

from __future__ import annotations

import functools

from wayline.settings import Settings


@functools.cache
def settings() -> Settings:
    return Settings.from_env()
