"""The pure core: events, the replay of a log, dispatch decisions, serde, durations, ids.

Nothing here does I/O or imports a layer above it (see ``.importlinter``)."""
