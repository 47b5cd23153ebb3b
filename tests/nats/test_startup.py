"""Starting the NATS world: clear errors, URL options, idempotent provisioning."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.nats.test_tls_and_nkeys import a_message_goes_round, anonymous_is_refused
from tests.nats_fixtures import NatsServer, OpenWorlds, free_port
from wayline.errors import ConfigurationError, WorldUnavailableError
from wayline.worlds.nats import NatsWorld, attribute_index, runs_index
from wayline.worlds.nats.options import parse_url


async def test_unreachable_server_is_a_clear_error_naming_the_url() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    world = NatsWorld(url, connect_attempts=2, connect_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(WorldUnavailableError) as info:
        await world.start()
    assert url in str(info.value)
    assert "after 2 attempts" in str(info.value)
    assert time.monotonic() - start < 10
    await world.close()


async def test_jetstream_disabled_is_a_clear_error(nats_server_no_jetstream: NatsServer) -> None:
    world = NatsWorld(nats_server_no_jetstream.url, prefix="nojs")
    with pytest.raises(WorldUnavailableError) as info:
        await world.start()
    assert "JetStream" in str(info.value) and nats_server_no_jetstream.url in str(info.value)
    await world.close()


async def test_start_is_idempotent_and_worlds_share_a_prefix(open_nats_world: OpenWorlds) -> None:
    a = await open_nats_world()
    await a.start()  # second start: no-op
    b = await open_nats_world()  # streams and buckets exist already: created idempotently
    mid = await a.enqueue("flow", {"x": 1})
    [d] = await b.receive("flow", wait_seconds=2)
    assert d.message_id == mid
    await b.ack(d)


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_the_streams_kept_by_limits_are_provisioned_each_with_its_subjects(
    open_nats_world: OpenWorlds, storage: str
) -> None:
    """The dead letters, the archive and the two indexes are streams kept by limits, in the
    world's storage, read directly; an index keeps one message a subject, the others all."""
    world = await open_nats_world(storage=storage)
    js, names = world._jetstream(), world.names
    kept = {
        names.dlq_stream: ([names.dlq_subject], "Wayline dead letters", -1),
        names.archive_stream: (
            [names.archive_wildcard],
            "Wayline archive: terminal runs moved out of the event log",
            -1,
        ),
        attribute_index.stream_name(names): (
            [attribute_index.wildcard(names)],
            "Wayline search attribute index: a subject per attribute value and run",
            1,
        ),
        runs_index.stream_name(names): (
            [runs_index.wildcard(names)],
            "Wayline runs index: a subject per run naming its status and workflow",
            1,
        ),
    }
    for name, (subjects, description, per_subject) in kept.items():
        config = (await js.stream_info(name)).config
        assert (config.subjects, config.description) == (subjects, description)
        assert (config.retention, config.storage) == ("limits", storage)
        assert (config.num_replicas, config.allow_direct) == (world.replicas, True)
        assert config.max_msgs_per_subject == per_subject, name


async def test_from_url_parses_servers_credentials_and_options() -> None:
    servers, options = parse_url(
        "nats://alice:s%3Acret@h1:4333,h2?prefix=prod&replicas=3&storage=memory"
        "&visibility_seconds=12.5"
    )
    assert servers == ["nats://h1:4333", "nats://h2:4222"]
    assert options == {
        "user": "alice",
        "password": "s:cret",
        "prefix": "prod",
        "replicas": 3,
        "storage": "memory",
        "visibility_seconds": 12.5,
    }
    world = NatsWorld.from_url("nats://tok@h1:4222?prefix=p1")
    assert world.prefix == "p1" and world.url == "nats://h1:4222?prefix=p1"
    assert "s:cret" not in NatsWorld.from_url("nats://u:s%3Acret@h:1?prefix=x").url
    with pytest.raises(ConfigurationError):
        parse_url("http://h:4222")
    with pytest.raises(ConfigurationError):
        parse_url("nats://h:4222?bogus=1")
    with pytest.raises(ConfigurationError, match="prefix= is given twice"):
        parse_url("nats://h:4222?prefix=a&prefix=b")
    with pytest.raises(ConfigurationError):
        NatsWorld("nats://h:4222", prefix="has.dot")


async def test_from_url_connects(nats_server: NatsServer) -> None:
    world = NatsWorld.from_url(f"{nats_server.url}?prefix=fromurl&replicas=1")
    await world.start()
    try:
        assert world.visibility_seconds == 30.0
        mid = await world.enqueue("t", {"a": 1})
        [d] = await world.receive("t", wait_seconds=2)
        assert d.message_id == mid
        await world.ack(d)
    finally:
        await world.close()


async def test_user_and_password_from_the_url(nats_server_auth: NatsServer) -> None:
    base = f"127.0.0.1:{nats_server_auth.port}"
    wrong = NatsWorld.from_url(f"nats://wayline:nope@{base}?prefix=auth", connect_attempts=1)
    with pytest.raises(WorldUnavailableError) as info:
        await wrong.start()
    assert base in str(info.value) and "nope" not in str(info.value)
    await wrong.close()
    world = NatsWorld.from_url(f"nats://wayline:s3cret%3Apw@{base}?prefix=auth")
    await world.start()
    try:
        assert "s3cret" not in world.url
        mid = await world.enqueue("flow", {"ok": True})
        [d] = await world.receive("flow", wait_seconds=2)
        assert d.message_id == mid
        await world.ack(d)
    finally:
        await world.close()


def test_an_old_server_is_refused_naming_the_minimum() -> None:
    from types import SimpleNamespace

    from wayline.worlds.nats.provision import check_version

    old = SimpleNamespace(connected_server_version=SimpleNamespace(major=2, minor=11, patch=4))
    with pytest.raises(WorldUnavailableError) as info:
        check_version(old, "nats://old:4222")
    assert "2.11.4" in str(info.value) and ">= 2.12" in str(info.value)
    new = SimpleNamespace(connected_server_version=SimpleNamespace(major=3, minor=0, patch=0))
    check_version(new, "nats://new:4222")


def test_connect_options_reach_the_client(tmp_path: Any) -> None:
    from wayline.worlds.nats.options import ConnectOptions

    async def cb(err: Exception) -> None: ...

    opts = ConnectOptions(
        servers=["nats://h:1"],
        token="tok",
        creds=str(tmp_path / "u.creds"),
        nkeys_seed=str(tmp_path / "u.nk"),
    )
    kwargs = opts.connect_kwargs(cb)
    assert kwargs["token"] == "tok" and kwargs["user_credentials"].endswith("u.creds")
    assert kwargs["nkeys_seed"].endswith("u.nk") and "tls" not in kwargs
    tls = ConnectOptions(servers=["tls://h:1"]).connect_kwargs(cb)
    assert tls["tls"] is not None


async def test_token_auth(nats_server_own: NatsServer) -> None:
    from tests.nats_fixtures import NatsServer as Server

    server = Server(nats_server_own.binary, nats_server_own.store / "tok", args=["--auth", "t0k"])
    server.store.mkdir()
    server.start()
    try:
        world = NatsWorld.from_url(f"nats://t0k@127.0.0.1:{server.port}?prefix=tok")
        await a_message_goes_round(world)
        await anonymous_is_refused(server.url, "tok")
    finally:
        server.stop()
