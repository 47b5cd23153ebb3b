"""The step-stream port: records a step writes to a named stream of its run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class Streams:
    """Append-only streams of JSON records, per run and name (``wayline._sdk.streams``)."""

    async def write_stream(
        self, run_id: str, stream: str, records: Sequence[Mapping[str, Any]]
    ) -> None:
        """Append records to the run's stream ``stream``, in order. A record is a JSON
        object (see ``wayline._sdk.streams``)."""
        raise NotImplementedError(f"{type(self).__name__} does not store step streams")

    async def read_stream(
        self, run_id: str, stream: str, start: int = 0, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` records of the stream from index ``start`` (0-based), in order."""
        raise NotImplementedError(f"{type(self).__name__} does not store step streams")
