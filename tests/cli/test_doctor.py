"""``wayline doctor`` on real servers: what it says of a nats-server's sync setting (read from
its monitoring endpoint, started with each setting), of a server it cannot use (unreachable,
wrong password, no JetStream), of a SQLite world's sync mode; its exit codes and its bad
input. In-process: the exit code is ``main``'s return value."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nats.test_tls_and_nkeys import pki, tls_server  # noqa: F401 - the fixtures
from tests.nats_fixtures import NatsServer, monitored_server, require_nats
from tests.servers import free_port
from wayline.cli import main
from wayline.worlds.local import LocalWorld
from wayline.worlds.nats import NatsWorld


@pytest.fixture
def lazy() -> Iterator[tuple[NatsServer, str]]:
    """The server's default: JetStream acknowledges before its store is on disk."""
    with monitored_server(None) as server:
        yield server


@pytest.fixture
def always() -> Iterator[tuple[NatsServer, str]]:
    with monitored_server("always") as server:
        yield server


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _lines(lines: list[str], prefix: str) -> list[str]:
    return [line for line in lines if line.startswith(prefix)]


async def _create_sqlite(path: Path) -> None:
    async with LocalWorld(path):
        pass  # the file, in WAL mode


async def _create_world(url: str) -> None:
    """The world's streams, as a worker creates them: so the world check does not warn."""
    async with NatsWorld.from_url(url):
        pass


def test_a_server_that_fsyncs_before_it_acknowledges_passes(
    always: tuple[NatsServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, monitor = always
    asyncio.run(_create_world(server.url))
    # --strict: any warning would make it exit 1
    code, lines, err = doctor(capsys, "--world", server.url, "--monitor", monitor, "--strict")
    assert code == 0 and not _lines(lines, "warn") and not _lines(lines, "fail"), (lines, err)
    [sync] = _lines(lines, "ok    sync:")
    assert "sync_interval always" in sync, lines
    for check in ("reachable", "auth", "tls", "jetstream", "world"):
        assert len(_lines(lines, f"ok    {check}:")) == 1, (check, lines)


def test_the_default_interval_is_one_warning_line_and_strict_fails_on_it(
    lazy: tuple[NatsServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, monitor = lazy
    asyncio.run(_create_world(server.url))
    code, lines, err = doctor(capsys, "--world", server.url, "--monitor", monitor + "/varz")
    assert code == 0, (lines, err)
    [warning] = _lines(lines, "warn")  # the sync setting, and nothing else
    assert warning.startswith("warn  sync: ") and "sync_interval 2m" in warning, warning
    assert "acknowledges writes before they are on disk" in warning, warning
    assert "jetstream { sync_interval: always }" in warning, warning
    assert doctor(capsys, "--world", server.url, "--monitor", monitor, "--strict")[0] == 1


def test_an_interval_set_in_the_configuration_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with monitored_server("10s") as (server, monitor):
        code, lines, _ = doctor(capsys, "--world", server.url, "--monitor", monitor)
    [warning] = _lines(lines, "warn  sync:")
    assert code == 0 and "(sync_interval 10s)" in warning and "up to 10s" in warning, lines


def test_the_monitoring_urls_come_from_the_environment(
    lazy: tuple[NatsServer, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, monitor = lazy
    monkeypatch.setenv("WAYLINE_NATS_MONITOR", monitor)
    code, lines, _ = doctor(capsys, "--world", server.url)
    assert code == 0 and len(_lines(lines, "warn  sync:")) == 1, lines
    assert "sync_interval 2m" in _lines(lines, "warn  sync:")[0], lines


def test_a_server_it_cannot_use_fails_under_the_check_that_says_why(
    nats_server_auth: NatsServer,
    nats_server_no_jetstream: NatsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = nats_server_auth.port
    code, lines, _ = doctor(capsys, "--world", f"nats://wayline:wrong@127.0.0.1:{port}")
    assert code == 1 and len(_lines(lines, "fail  auth:")) == 1, lines
    assert "Authorization Violation" in lines[-1] and "wrong" not in "".join(lines), lines
    code, lines, _ = doctor(capsys, "--world", f"nats://wayline:s3cret%3Apw@127.0.0.1:{port}")
    assert code == 0 and _lines(lines, "ok    auth:"), lines
    assert "requires authentication" in _lines(lines, "ok    auth:")[0], lines
    code, lines, _ = doctor(capsys, "--world", nats_server_no_jetstream.url)
    assert code == 1 and _lines(lines, "fail  jetstream:"), lines
    code, lines, _ = doctor(capsys, "--world", f"nats://127.0.0.1:{free_port()}")
    assert code == 1 and _lines(lines, "fail  reachable:"), lines


def test_a_monitoring_endpoint_that_does_not_answer_fails_the_sync_check(
    always: tuple[NatsServer, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = always
    silent = f"http://127.0.0.1:{free_port()}"
    code, lines, _ = doctor(capsys, "--world", server.url, "--monitor", silent)
    [failed] = _lines(lines, "fail  sync:")
    assert code == 1 and f"cannot read {silent}/varz" in failed, lines


def test_bad_input_is_one_error_line_and_exit_2(
    always: tuple[NatsServer, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server, _ = always
    for args, says in (
        (("--world", server.url, "--monitor", "ftp://x"), "not a nats-server monitoring URL"),
        (("--world", f"sqlite:///{tmp_path}/w.db", "--monitor", "http://x:1"), "not on NATS"),
        (("--world", f"sqlite:///{tmp_path}/w.db?sync=sometimes"), "sync='sometimes'"),
    ):
        code, lines, err = doctor(capsys, *args)
        assert code == 2 and lines == [], (args, lines)
        assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err


def test_a_sqlite_world_reports_its_sync_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "w.db"
    asyncio.run(_create_sqlite(path))
    code, lines, _ = doctor(capsys, "--world", f"sqlite:///{path}", "--strict")
    assert code == 0 and _lines(lines, "ok    database:") and _lines(lines, "ok    sync:"), lines
    code, lines, _ = doctor(capsys, "--world", f"sqlite:///{path}?sync=normal")
    [warning] = _lines(lines, "warn  sync:")
    assert code == 0 and "acknowledges writes before they are on disk" in warning, lines
    assert "drop ?sync=normal" in warning, lines
    garbage = tmp_path / "not-a.db"
    garbage.write_bytes(b"not a database, " * 512)
    code, lines, _ = doctor(capsys, "--world", f"sqlite:///{garbage}")
    [failed] = _lines(lines, "fail  database:")
    assert code == 1 and "not a database" in failed, lines
    assert garbage.read_bytes() == b"not a database, " * 512  # read-only: nothing written


def test_tls_is_checked_with_the_options_the_url_gives(
    pki: Path,  # noqa: F811
    tls_server: NatsServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"tls://127.0.0.1:{tls_server.port}"
    code, lines, _ = doctor(capsys, "--world", url)  # a CA this client does not trust
    [failed] = _lines(lines, "fail  tls:")
    assert code == 1 and "certificate verify failed" in failed, lines
    code, lines, _ = doctor(capsys, "--world", f"{url}?tls_ca={pki / 'ca.pem'}")
    assert _lines(lines, "ok    tls:") and "verified" in _lines(lines, "ok    tls:")[0], lines
    assert not _lines(lines, "fail"), lines


def test_the_account_limits_come_from_the_jetstream_account_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An account limited to 2 streams: the limit is read from the server, and a full one
    warns (the world's own streams would be refused)."""
    conf = tmp_path / "accounts.conf"
    conf.write_text(
        "accounts { W: { jetstream: {max_streams: 2, max_file: 10MB, max_mem: 1MB},"
        " users: [{user: w, password: p}] } }\n"
    )
    server = NatsServer(require_nats(), tmp_path, args=["-c", str(conf)])
    server.start()
    try:
        url = f"nats://w:p@127.0.0.1:{server.port}"
        code, lines, _ = doctor(capsys, "--world", url)
        [limits] = _lines(lines, "ok    jetstream:")
        assert code == 0 and "streams 0 of 2" in limits and "storage 0 of 10485760" in limits
        asyncio.run(_streams(url, "a", "b"))
        code, lines, _ = doctor(capsys, "--world", url)
        [full] = _lines(lines, "warn  jetstream:")
        assert code == 0 and "streams 2 of 2" in full and "streams at 90%" in full, lines
    finally:
        server.stop()


async def _streams(url: str, *names: str) -> None:
    import nats

    nc = await nats.connect(url)
    try:
        for name in names:
            await nc.jetstream().add_stream(name=name, subjects=[f"{name}.>"], max_bytes=10**6)
    finally:
        await nc.close()


async def _written_by_a_release_before_partitions(url: str, prefix: str) -> str:
    """An append as a release before partitions makes it: onto the first partition's subject
    of a run whose id hashes to partition 2 (such a release knows no other names)."""
    import nats
    from wayline._core.ids import new_run_id
    from wayline.worlds.nats.names import Names, partition_of

    run_id = next(r for r in iter(new_run_id, "") if partition_of(r, 3) == 2)
    nc = await nats.connect(url)
    try:
        await nc.jetstream().publish(Names(prefix).run_subject(run_id), b"{}")
    finally:
        await nc.close()
    return run_id


def test_a_partitioned_world_is_reported_and_runs_an_old_release_wrote_fail_it(
    nats_server: NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A world of three partitions is named so; a run that a release before partitions wrote
    into the first partition's stream, though its id hashes to another (where no partitioned
    process looks for it), fails the world check."""
    prefix = f"doctorparts{uuid.uuid4().hex[:8]}"
    url = f"{nats_server.url}?prefix={prefix}&partitions=3"
    asyncio.run(_create_world(url))
    code, lines, _ = doctor(capsys, "--world", url)
    [world] = _lines(lines, "ok    world:")
    assert code == 0 and "3 partitions" in world, lines
    asyncio.run(_written_by_a_release_before_partitions(nats_server.url, prefix))
    code, lines, _ = doctor(capsys, "--world", url)
    [failed] = _lines(lines, "fail  world:")
    assert code != 0 and "1 run(s)" in failed and "release before partitions" in failed, lines
