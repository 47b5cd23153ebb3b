"""``wayline.open_world(url)``: a world from a URL."""

from __future__ import annotations

from typing import Any

from .errors import ConfigurationError
from .world import World


def open_world(url: str, **options: Any) -> World:
    """``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` (as SQLAlchemy writes them),
    or ``nats://host:port``. The world is returned unstarted: use ``async with``."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigurationError(f"no database path in {url!r} (try sqlite:///wayline.db)")
        from .worlds.local import LocalWorld

        return LocalWorld(path, **options)
    if url.startswith(("nats://", "tls://")):
        try:
            from .worlds.nats import NatsWorld
        except ImportError as err:
            raise ConfigurationError(
                f"{url!r} needs the NATS world: pip install 'wayline[nats]' ({err})"
            ) from err
        try:
            world: World = NatsWorld.from_url(url, **options)
        except ValueError as err:  # urllib's own complaints (a bad IPv6 literal, a bad port)
            raise ConfigurationError(f"invalid world URL {url!r}: {err}") from None
        return world
    raise ConfigurationError(
        f"unsupported world URL {url!r}: use sqlite:///relative.db, sqlite:////abs/path.db "
        "or nats://host:4222"
    )
