"""The world's ports: one small abstract class per thing the runtime asks of a store.

``World`` (``seam``) is their composition, so a world implements them all; a caller that
needs one thing takes that port's type (``_engine.step_slots`` takes :class:`Slots`, the
worker's receive and settle take :class:`WorkQueue`), and ``mypy --strict`` then proves it
uses nothing else. Each port has its own contract suite in ``tests/contract``, run on every
world. A port whose every method has a default (a world may offer none of it: the
simulator keeps no step streams) is a plain class rather than an abstract one.
"""

from .blobs import BlobRef, Blobs, PayloadField
from .change_feed import ChangeFeed, EndListener, RunWatch
from .clock import Clock
from .event_log import EventLog, HookInfo
from .hook_payloads import HookPayloads
from .lifecycle import Lifecycle
from .queue import Delivery, LaneDrain, QueueDepth, WorkQueue
from .rate_buckets import RateBuckets
from .registry import Registry
from .retention import Retention
from .slots import Slots
from .streams import Streams

__all__ = [
    "BlobRef",
    "Blobs",
    "ChangeFeed",
    "Clock",
    "Delivery",
    "EndListener",
    "EventLog",
    "HookInfo",
    "HookPayloads",
    "LaneDrain",
    "Lifecycle",
    "PayloadField",
    "QueueDepth",
    "RateBuckets",
    "Registry",
    "Retention",
    "RunWatch",
    "Slots",
    "Streams",
    "WorkQueue",
]
