"""A NATS URL whose port is not a port is refused when it is read, as a configuration error
that names the host, instead of being tried as a server (a worker waiting for its world
tried such a URL for up to 300 s, and ``wayline`` reported it as a server that is down)."""

from __future__ import annotations

import pytest

from wayline.errors import ConfigurationError
from wayline.worlds.nats.options import parse_url
from wayline.worlds.nats.world import NatsWorld


@pytest.mark.parametrize(
    "hosts",
    ["127.0.0.1:notaport", "a:4222,b:42x2", "h:0", "h:65536", "h:", "[::1]:port", "h:-1"],
)
def test_a_port_that_is_not_a_port_is_a_configuration_error(hosts: str) -> None:
    with pytest.raises(ConfigurationError, match="port") as info:
        parse_url(f"nats://wayline:s3cret@{hosts}?prefix=p")
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("hosts", "servers"),
    [
        ("h", ["nats://h:4222"]),
        ("h:1", ["nats://h:1"]),
        ("h:65535,k", ["nats://h:65535", "nats://k:4222"]),
        ("[::1]:4223", ["nats://[::1]:4223"]),
    ],
)
def test_good_ports_are_kept(hosts: str, servers: list[str]) -> None:
    assert parse_url(f"nats://{hosts}")[0] == servers


@pytest.mark.parametrize(
    ("url", "servers"),
    [
        (
            "nats://127.0.0.1:4001,nats://127.0.0.1:4002, nats://127.0.0.1:4003?prefix=p",
            ["nats://127.0.0.1:4001", "nats://127.0.0.1:4002", "nats://127.0.0.1:4003"],
        ),
        ("tls://a:1,tls://b:2", ["tls://a:1", "tls://b:2"]),
        ("nats://u:pw@a:1,nats://b?prefix=p", ["nats://a:1", "nats://b:4222"]),
    ],
)
def test_servers_listed_each_with_its_scheme_are_all_kept(url: str, servers: list[str]) -> None:
    """``nats://a:1,nats://b:2`` (as NATS's own tools list servers) names both servers: the
    second scheme once ended the URL's host part, so the world knew only the first server and
    a bogus ``nats:`` (tests/powercut's clusters were listed so)."""
    assert parse_url(url)[0] == servers


@pytest.mark.parametrize(
    "servers",
    [
        "nats://127.0.0.1:notaport",
        "h:0",
        "tls://wayline:s3cret@h:65536",
        "nats://[::1]:port",
        ["nats://a:4222", "b:42x2"],
        "nats://a:4222,nats://wayline:s3cret@b:",
    ],
)
def test_a_server_handed_to_the_constructor_gets_the_same_port_check(
    servers: str | list[str],
) -> None:
    """Servers handed to ``NatsWorld(...)`` (not read from a URL) are checked as a URL's are:
    they skipped the check, so a bad port was tried as a server that is down."""
    with pytest.raises(ConfigurationError, match="port") as info:
        NatsWorld(servers)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "servers", ["nats://h:4222", "h", "[::1]:4222", "tls://u:pw@h:1", ["a:65535", "nats://b"]]
)
def test_good_servers_handed_to_the_constructor_are_taken(servers: str | list[str]) -> None:
    NatsWorld(servers)
