"""``wayline.open_world(url)``: a world from a URL, found by its scheme.

The seam never imports a concrete world: a scheme names a ``module:attribute`` that is imported
only when a URL asks for it. The two worlds that ship are built in; another package adds one
with an entry point in the ``wayline.worlds`` group (name: the scheme, value:
``module:WorldClass``; the class has ``from_url(url, **options)``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from ..errors import ConfigurationError
from .seam import World

BUILT_IN = {
    "sqlite": "wayline.worlds.local:LocalWorld",
    "nats": "wayline.worlds.nats:NatsWorld",
    "tls": "wayline.worlds.nats:NatsWorld",
}
EXTRAS = {"nats": "nats", "tls": "nats"}
"""The pip extra a built-in world needs (``pip install 'wayline[nats]'``)."""


def _target(scheme: str) -> str | None:
    for point in importlib.metadata.entry_points(group="wayline.worlds"):
        if point.name == scheme:
            return point.value
    return BUILT_IN.get(scheme)


def _world_class(url: str, scheme: str, target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        extra = EXTRAS.get(scheme)
        hint = f"pip install 'wayline[{extra}]'" if extra else f"install {module_name}"
        raise ConfigurationError(f"{url!r} needs its world: {hint} ({err})") from err
    return getattr(module, attribute)


def open_world(url: str, **options: Any) -> World:
    """``sqlite:///relative.db``, ``sqlite:////absolute/path.db`` (as SQLAlchemy writes them),
    or ``nats://host:port``. The world is returned unstarted: use ``async with``."""
    scheme, sep, _ = url.partition("://")
    target = _target(scheme) if sep else None
    if target is None:
        raise ConfigurationError(
            f"unsupported world URL {url!r}: use sqlite:///relative.db, sqlite:////abs/path.db "
            "or nats://host:4222"
        )
    try:
        world = _world_class(url, scheme, target).from_url(url, **options)
    except ValueError as err:  # urllib's own complaints (a bad IPv6 literal, a bad port)
        raise ConfigurationError(f"invalid world URL {url!r}: {err}") from None
    if not isinstance(world, World):
        raise ConfigurationError(f"{target} built {world!r} for {url!r}, not a wayline World")
    return world
