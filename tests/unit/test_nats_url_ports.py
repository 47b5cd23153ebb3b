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
    "servers",
    [
        "nats://h:4222",
        "h",
        "[::1]:4222",
        "[::1]",
        "tls://u:pw@h:1",
        ["a:65535", "nats://b"],
        "wss://h",
    ],
)
def test_good_servers_handed_to_the_constructor_are_taken(servers: str | list[str]) -> None:
    NatsWorld(servers)


@pytest.mark.parametrize(
    "servers",
    ["::1", "nats://2001:db8::10:4222", "[::1", "tls://wayline:s3cret@[::1", "nats://[::1]x"],
)
def test_an_ipv6_address_out_of_brackets_is_refused_by_the_constructor(servers: str) -> None:
    """The client reads ``::1`` or an unclosed ``[::1`` as no URL at all ("invalid connect url
    option"), and the world tried it as a server that is down; the check read the last group
    of the address as a port, and let it through."""
    with pytest.raises(ConfigurationError, match="IPv6") as info:
        NatsWorld(servers)
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    "hosts", ["::1", "2001:db8::10:4222", "[::1", "[::1]:4222,[::2", "[::1]x:4222"]
)
def test_an_ipv6_address_out_of_brackets_is_refused_in_a_url(hosts: str) -> None:
    """The same in a URL; an unclosed bracket raised urlsplit's ValueError, not a
    configuration error."""
    with pytest.raises(ConfigurationError, match="IPv6") as info:
        parse_url(f"nats://wayline:s3cret@{hosts}?prefix=p")
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize("servers", ["nats://a:4222 nats://b:4222", "a b:4222", "nats://h: 4222"])
def test_servers_apart_by_spaces_are_refused_as_such(servers: str) -> None:
    """Servers are listed with commas: ``a b:4222`` was tried as the host ``a b``, and a list
    apart by spaces was refused as a bad port ``''``."""
    with pytest.raises(ConfigurationError, match="commas"):
        NatsWorld(servers)


@pytest.mark.parametrize("mark", ["/", "?", "#"])
def test_a_password_that_ends_the_host_part_is_refused_without_naming_it(mark: str) -> None:
    """A password holding ``/``, ``?`` or ``#`` (not percent-encoded) ends the host part where
    it stands, so the start of the password was named in the error as a host and a port."""
    for shown in (f"nats://wayline:zq{mark}xw@h:4222", f"wayline:zq{mark}xw@h:4222"):
        with pytest.raises(ConfigurationError, match="percent-encoded") as info:
            NatsWorld(shown)
        assert "zq" not in str(info.value)
    with pytest.raises(ConfigurationError, match="percent-encoded") as info:
        parse_url(f"nats://wayline:zq{mark}xw@h:4222?prefix=p")
    assert "zq" not in str(info.value)


@pytest.mark.parametrize(
    ("servers", "url"),
    [
        ("wayline:s3cret@h:4222", "wayline:***@h:4222?prefix=wayline"),
        ("nats://s3cret@h:4222", "nats://***@h:4222?prefix=wayline"),
        ("s3cret@h", "***@h?prefix=wayline"),
        ("nats://wayline:s3cret@[::1]:4222", "nats://wayline:***@[::1]:4222?prefix=wayline"),
    ],
)
def test_a_world_url_shows_no_password_or_token_of_a_server(servers: str, url: str) -> None:
    """``World.url`` (in log lines and errors) hid a server's password only when it had a
    scheme: ``user:pass@host`` was read as the scheme ``user``, and a token (a user without a
    password) was shown as it was; an IPv6 host also lost its brackets."""
    world = NatsWorld(servers)
    assert world.url == url
    assert "s3cret" not in world._servers_shown


@pytest.mark.parametrize(
    "url", ["nats://u:pw@h:4222?prefix=a@b", "nats://h:4222?token=a@b", "nats://u:pw@[::1]"]
)
def test_an_at_sign_after_the_host_part_is_taken(url: str) -> None:
    parse_url(url)
