"""A deterministic simulator of the engine on the World seam (FoundationDB's simulation,
TigerBeetle's VOPR, in Python): the in-memory world (``wayline.worlds.memory``), worker
processes and clients run on one event loop on virtual time, every choice -- the order of
ready callbacks, the faults, the crashes, the workload -- drawn from one seed, and the
invariants of docs/ownership.md and docs/durability.md are checked after each seed. A seed
that fails replays the same trace, byte for byte::

    make sim SEEDS=200      # seeds 0..199, a line per failing seed
    make sim SEED=17        # one seed, its full trace
"""

from .faults import FaultPlan, FaultyWorld
from .loop import VirtualLoop
from .runner import Outcome, run_seed

__all__ = ["FaultPlan", "FaultyWorld", "Outcome", "VirtualLoop", "run_seed"]
