"""The engine: one invocation of a run (handler), its steps, children and unwind, and the
batching of inline outcomes. Talks to a world only through ``wayline.world``."""
