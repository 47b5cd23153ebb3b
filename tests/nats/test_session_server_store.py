"""Where the test servers keep their stores (docs/testing.md, "The session nats-server's store
in memory"): the session server's store, thrown away with its directory, lives in memory where
the machine has it; a server a test restarts or crashes keeps its store on disk."""

from __future__ import annotations

import pytest

from tests.nats_fixtures import MEMORY_STORE_ROOT, NatsServer, _store_root


def test_the_session_servers_store_is_in_memory_where_the_machine_has_some(
    nats_server: NatsServer,
) -> None:
    if not MEMORY_STORE_ROOT.is_dir():
        pytest.skip(f"this machine has no {MEMORY_STORE_ROOT}")
    assert nats_server.store.is_relative_to(MEMORY_STORE_ROOT), nats_server.store
    assert nats_server.running


def test_a_store_that_must_outlive_its_server_stays_on_disk() -> None:
    assert _store_root(discard=False) is None
