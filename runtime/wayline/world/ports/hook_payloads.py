"""The hook-payload port: payloads sent to a hook before it waits (``world.hook_buffer``)."""

from __future__ import annotations

from ..hook_buffer import HookBuffer


class HookPayloads:
    """Where a world keeps payloads that wait for their hook."""

    def hook_buffer(self) -> HookBuffer:
        """The store of payloads sent before the wait (``hook_buffer``): what
        ``resume_hook(..., buffer=)`` stores and a new hook takes."""
        raise NotImplementedError(f"{type(self).__name__} does not buffer hook payloads")
