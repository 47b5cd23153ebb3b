"""The in-memory world: the World contract on plain dictionaries, for the simulator
(``wayline.sim``) and for tests. Nothing is durable: the store lives as long as the process."""

from .store import MemoryStore
from .world import MemoryWorld

__all__ = ["MemoryStore", "MemoryWorld"]
