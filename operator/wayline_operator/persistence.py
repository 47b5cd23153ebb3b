"""What kopf keeps on a resource: nothing (no finalizer either: ``handlers``, ``periodic``).
Every write to a resource is a write to etcd, and at scale the operator's own bookkeeping was
a third of them (a creation cost the finalizer patch, then a second patch for kopf's diff base
and progress annotations).

- **No diff base** (:class:`NoDiffBase`): no handler reacts to a *change* of a spec (the
  status pump carries a changed spec to the run: ``Mirror.seen`` syncs a resource whose
  generation moved), so kopf needs no ``last-handled-configuration``. Without one kopf sees
  every event of a resource as its creation; the creation handlers are idempotent (a run id is
  derived from the resource's uid, a hook delivers once) and filtered (``when=``) to resources
  not yet handled, so that costs nothing but a filter call.
- **Progress in memory** (:class:`MemoryProgress`): kopf records a handler's attempts (for
  retries and their backoff). A handler that succeeds at once leaves no record, but with
  annotations storage its store-then-purge still cost a patch (kopf's marker annotation). In
  memory nothing is written; after a restart a failing handler counts its retries afresh,
  which its idempotence makes harmless. A delayed retry still provokes its new event with
  kopf's own "touch" annotation (a rare path).
"""

from __future__ import annotations

from typing import Any

import kopf


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's diff base, not kept: every event is a creation for kopf (module docstring)."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}  # kopf deep-copies the whole body here otherwise, on every watch event

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class MemoryProgress(kopf.ProgressStorage):
    """Handler progress kept in this process, by resource uid (module docstring)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._touch = kopf.AnnotationsProgressStorage(prefix=prefix)
        self._records: dict[tuple[str, str], Any] = {}

    @staticmethod
    def _uid(body: Any) -> str:
        return str(body.get("metadata", {}).get("uid"))

    def fetch(self, *, key: Any, body: Any) -> Any:
        return self._records.get((self._uid(body), str(key)))

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        self._records[(self._uid(body), str(key))] = dict(record)

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        self._records.pop((self._uid(body), str(key)), None)

    def touch(self, *, body: Any, patch: Any, value: str | None) -> None:
        self._touch.touch(body=body, patch=patch, value=value)

    def clear(self, *, essence: Any) -> Any:
        return self._touch.clear(essence=essence)
