"""The event loop a process runs on: asyncio's own, or uvloop (``WAYLINE_LOOP=uvloop``).

uvloop (``pip install 'wayline[uvloop]'``) runs the loop's turns, its timers and its sockets
in compiled code (libuv). Everything Wayline does on a loop goes through asyncio's public
interface, the engine's eager tasks included (``_engine/eager.py``: a pure-Python
``asyncio`` task, which schedules its steps with ``call_soon`` like any other), so the two
loops are interchangeable; ``docs/performance.md`` says what uvloop saves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .errors import ConfigurationError

LOOPS = ("asyncio", "uvloop")
"""The names ``WAYLINE_LOOP`` takes (``wayline.settings``)."""


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a loop of kind ``name`` (for ``asyncio.Runner(loop_factory=...)``); a
    ConfigurationError, at once, for an unknown name or a loop that is not installed."""
    if name == "asyncio":
        return asyncio.new_event_loop
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:
            raise ConfigurationError(
                "WAYLINE_LOOP=uvloop, but uvloop is not installed: "
                "pip install 'wayline[uvloop]', or unset WAYLINE_LOOP"
            ) from None
        new: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
        return new
    raise ConfigurationError(f"WAYLINE_LOOP must be one of {', '.join(LOOPS)}, got {name!r}")


def new_event_loop(name: str | None = None) -> asyncio.AbstractEventLoop:
    """A new loop of kind ``name``, by default the one ``WAYLINE_LOOP`` names."""
    if name is None:
        from .settings import Settings

        name = Settings.from_env().event_loop
    return loop_factory(name)()
