"""World implementations.

Only ``worlds.local`` touches SQLite; only ``worlds.nats`` imports nats.
"""
