"""The embedded world: one SQLite file, safe across processes on one machine."""

from .world import LocalWorld

__all__ = ["LocalWorld"]
