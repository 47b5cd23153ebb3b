"""The retention port: delete or archive runs that ended long enough ago."""

from __future__ import annotations

from collections.abc import Sequence

from ..._core.events import Event, RunStatus
from ..._core.projections import RunInfo


class Retention:
    """What ``wayline cleanup`` and ``wayline archive`` ask of a world."""

    async def delete_runs(
        self, *, older_than: float, statuses: Sequence[RunStatus] | None = None
    ) -> int:
        """Delete terminal runs that ended at least ``older_than`` seconds ago (inclusive:
        0 takes every terminal run, even one that ended this millisecond), with their events,
        hooks and queued messages. Returns how many runs were deleted."""
        raise NotImplementedError(f"{type(self).__name__} does not implement cleanup yet")

    async def archive_runs(self, *, older_than: float, limit: int = 1000) -> int:
        """Move up to ``limit`` (at most 1000) terminal runs that ended at least
        ``older_than`` seconds ago, with their events, to the archive in one transaction.
        Returns how many were moved; call again until it returns 0."""
        raise NotImplementedError(f"{type(self).__name__} does not implement archive yet")

    async def archived_count(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement archive yet")

    async def archived_run(self, run_id: str) -> tuple[RunInfo, list[Event]] | None:
        """The run the archive holds under ``run_id`` (the latest one archived, when the id
        was archived more than once) and its log, as stored: a payload kept out of line is
        still its reference, and its blob is read through the blob port as a live run's is.
        None when the archive holds no such run, or keeps no copy of what it archives (the
        memory world only counts them). A copy that does not read raises
        ``CorruptLogError``."""
        return None

    async def archived_page(
        self, run_id: str, after_seq: int, limit: int
    ) -> tuple[int, list[Event]] | None:
        """A page of the log of the run ``archived_run`` reads: the run's last ``seq`` and at
        most ``limit`` events after ``after_seq``, in order, as stored (a payload kept out of
        line is still its reference). None as ``archived_run`` is None. This default reads
        the whole copy and slices it; a world whose archive can be read a range at a time
        overrides it so that a walk of a long archived run does not read the copy once a page
        (issue #37)."""
        found = await self.archived_run(run_id)
        if found is None:
            return None
        info, log = found
        return info.last_seq, [e for e in log if e.seq > after_seq][: max(0, limit)]
