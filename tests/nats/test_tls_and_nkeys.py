"""Connections that cannot succeed fail at once, naming the cause, on a real nats-server with
a CA made in the test: an untrusted certificate, a hostname mismatch, nats:// against a
TLS-only server. The CLI says it in one line with exit 2. nkey authentication works."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.nats_fixtures import NatsServer, require_nats
from wayline.cli import main
from wayline.errors import ConfigurationError, WorldUnavailableError
from wayline.worlds.nats import NatsWorld


def _openssl(command: str, cwd: Path) -> None:
    subprocess.run(
        ["openssl", *shlex.split(command)], cwd=cwd, check=True, capture_output=True, timeout=60
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private CA and two server certificates signed by it: ``ip.pem`` names 127.0.0.1,
    ``other.pem`` names only ``other.invalid``."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a CA")
    d = tmp_path_factory.mktemp("pki")
    _openssl(
        "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=wayline-test-ca "
        "-keyout ca.key -out ca.pem",
        d,
    )
    _openssl("req -newkey rsa:2048 -nodes -subj /CN=wayline-test -keyout srv.key -out srv.csr", d)
    for name, san in (("ip", "IP:127.0.0.1"), ("other", "DNS:other.invalid")):
        (d / f"{name}.cnf").write_text(f"subjectAltName={san}\n")
        _openssl(
            f"x509 -req -days 1 -CAcreateserial -in srv.csr -CA ca.pem -CAkey ca.key "
            f"-out {name}.pem -extfile {name}.cnf",
            d,
        )
    return d


def _tls_server(pki: Path, tmp: Path, cert: str) -> Iterator[NatsServer]:
    server = NatsServer(
        require_nats(),
        tmp,
        args=["--tls", "--tlscert", str(pki / cert), "--tlskey", str(pki / "srv.key")],
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_server(pki: Path, tmp_path: Path) -> Iterator[NatsServer]:
    yield from _tls_server(pki, tmp_path, "ip.pem")


@pytest.fixture
def tls_server_other_name(pki: Path, tmp_path: Path) -> Iterator[NatsServer]:
    yield from _tls_server(pki, tmp_path, "other.pem")


async def _refused(world: NatsWorld) -> str:
    # a hang is the bug being tested: the bound here only turns one into a failure
    with pytest.raises(ConfigurationError) as info:
        await asyncio.wait_for(world.start(), timeout=60)
    await world.close()
    return str(info.value)


async def a_message_goes_round(world: NatsWorld, payload: dict[str, Any] | None = None) -> None:
    """Start ``world``, enqueue a message, receive that one and acknowledge it, and close."""
    await world.start()
    try:
        mid = await world.enqueue("flow", payload or {})
        [d] = await world.receive("flow", wait_seconds=2)
        assert d.message_id == mid
        await world.ack(d)
    finally:
        await world.close()


async def anonymous_is_refused(url: str, prefix: str) -> None:
    """A world that gives no credentials cannot start on the server at ``url``."""
    anonymous = NatsWorld(url, prefix=prefix, connect_attempts=1)
    with pytest.raises(WorldUnavailableError):
        await anonymous.start()
    await anonymous.close()


async def test_an_untrusted_ca_names_certificate_verify_failed(tls_server: NatsServer) -> None:
    url = f"tls://127.0.0.1:{tls_server.port}"
    text = await _refused(NatsWorld(url, prefix="tls1", connect_attempts=3))
    assert "certificate verify failed" in text and url in text and "tls_ca" in text


async def test_a_hostname_mismatch_is_named(pki: Path, tls_server_other_name: NatsServer) -> None:
    url = f"tls://127.0.0.1:{tls_server_other_name.port}"
    world = NatsWorld(url, prefix="tls2", tls_ca=str(pki / "ca.pem"))
    assert "hostname mismatch" in await _refused(world)


async def test_plain_nats_against_a_tls_only_server_says_tls_is_required(
    tls_server: NatsServer,
) -> None:
    text = await _refused(NatsWorld(tls_server.url, prefix="tls3"))
    assert "requires TLS" in text


async def test_the_right_ca_connects(pki: Path, tls_server: NatsServer) -> None:
    world = NatsWorld(
        f"tls://127.0.0.1:{tls_server.port}", prefix="tls4", tls_ca=str(pki / "ca.pem")
    )
    await a_message_goes_round(world, {"x": 1})


def test_the_cli_says_it_in_one_line_with_exit_2(
    tls_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["runs", "list", "--world", f"tls://127.0.0.1:{tls_server.port}?prefix=cli"])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "certificate verify failed" in lines[0] and "Traceback" not in err


async def test_nkey_authentication(tmp_path: Path) -> None:
    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(seed).public_key.decode()
    conf = tmp_path / "nkey.conf"
    conf.write_text(f"authorization {{ users = [ {{ nkey: {public} }} ] }}\n")
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed)
    server = NatsServer(require_nats(), tmp_path, args=["-c", str(conf)])
    server.start()
    try:
        for world in (
            NatsWorld(server.url, prefix="nk", nkeys_seed=str(seed_file)),
            NatsWorld(server.url, prefix="nk", nkeys_seed_str=seed.decode()),
        ):
            await a_message_goes_round(world)
        await anonymous_is_refused(server.url, "nk")
    finally:
        server.stop()


# --- TLS asked for, plain text offered ---------------------------------------------------------
class PlainListener:
    """A listener on ``port`` that answers as a NATS server without TLS (its INFO does not
    require it) and records what each client sends: the credentials would be in CONNECT."""

    def __init__(self) -> None:
        self.received = b""
        self.server: asyncio.Server | None = None

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        info = '{"server_id":"plain","version":"2.10.0","proto":1,"max_payload":1048576}'
        writer.write(f"INFO {info}\r\n".encode())
        await writer.drain()
        try:
            while chunk := await asyncio.wait_for(reader.read(4096), 5):
                self.received += chunk
                if b"PING" in chunk:
                    writer.write(b"PONG\r\n")
                    await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def test_tls_asked_for_is_never_plain_text_against_a_server_without_tls(
    pki: Path, nats_server: NatsServer
) -> None:
    """nats-py upgrades to TLS only when the server's INFO requires it: a ``tls://`` URL (or
    ``tls_ca``) against a server without TLS connected in the clear, credentials and all."""
    for url, options in (
        (f"tls://127.0.0.1:{nats_server.port}", {"tls_ca": str(pki / "ca.pem")}),
        (f"nats://127.0.0.1:{nats_server.port}", {"tls_ca": str(pki / "ca.pem")}),
        (f"tls://127.0.0.1:{nats_server.port}", {}),
    ):
        text = await _refused(NatsWorld(url, prefix="tls5", connect_attempts=3, **options))
        assert "offers no TLS" in text and "plain text" in text, text
    listener = PlainListener()
    port = _free_port()
    await listener.start(port)
    try:
        world = NatsWorld(f"tls://127.0.0.1:{port}", prefix="tls6", user="u", password="secret-pw")
        assert "offers no TLS" in await _refused(world)
    finally:
        await listener.stop()
    assert listener.received == b"" or b"CONNECT" not in listener.received
    assert b"secret-pw" not in listener.received


async def test_a_reconnect_where_tls_was_asked_for_is_never_plain_text(
    pki: Path, tmp_path: Path
) -> None:
    """Connected over TLS; the server goes and a server without TLS answers on its port: the
    world keeps reconnecting and never sends CONNECT (its credentials) to it."""
    servers = _tls_server(pki, tmp_path, "ip.pem")
    server = next(servers)
    world = NatsWorld(f"tls://127.0.0.1:{server.port}", prefix="tls7", tls_ca=str(pki / "ca.pem"))
    await world.start()
    listener = PlainListener()
    try:
        with contextlib.suppress(StopIteration):
            next(servers)  # the TLS server stops
        await listener.start(server.port)
        for _ in range(100):  # the client tries again every second (reconnect_time_wait)
            if listener.received or listener.server is None:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.5)
        assert b"CONNECT" not in listener.received
    finally:
        await listener.stop()
        await world.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_refused_handshake_is_reported_in_a_task_that_handled_a_cancel(
    tls_server: NatsServer,
) -> None:
    """A start in a task that caught and handled a cancel before it (the task still counts
    it: nothing takes a caught cancel off) reports a refused TLS handshake as the
    configuration error it is. nats-py cancels its close waiters when a handshake fails, and
    the close of the failed attempt took that CancelledError for a stop of the start, as the
    task counted a cancel: the start ended in a stray CancelledError."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(1)
    try:
        untrusted = NatsWorld(f"tls://127.0.0.1:{tls_server.port}", prefix="tlscounted1")
        plain = NatsWorld(tls_server.url, prefix="tlscounted2")
        for world, said in ((untrusted, "certificate verify failed"), (plain, "requires TLS")):
            with pytest.raises(ConfigurationError, match=said):
                await world.start()
            await world.close()
    finally:
        task.uncancel()
