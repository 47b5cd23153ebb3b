"""The test servers' ports: never from the kernel's range of ephemeral ports, which outgoing
connections take their local port from (a server's bind then fails with "address already in
use"), and never the same port twice in one process."""

from __future__ import annotations

import socket

from tests.servers import _ephemeral, free_port


def test_a_free_port_is_outside_the_ephemeral_range_and_bindable() -> None:
    ephemeral = _ephemeral()
    ports = [free_port() for _ in range(50)]
    assert not [p for p in ports if p in ephemeral]
    assert len(set(ports)) == len(ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_never_handed_out() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        assert busy not in [free_port() for _ in range(300)]
