"""The chart's values combinations: each lints, renders and is accepted object by object by a
real API server (``kubectl apply --dry-run=server``); what each renders (a 3-node JetStream
cluster, auth and TLS from Secrets, the world URL from a Secret, a NetworkPolicy, namespaced
Roles and kopf peering); and the rendered NATS configuration and world URL work on real
nats-servers: clients authenticate over TLS, and three nodes form a JetStream cluster whose
streams the world creates with three replicas."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.nats.test_tls_and_nkeys import pki  # noqa: F401 - the fixture: a CA, 127.0.0.1's cert
from tests.nats_fixtures import NatsServer, require_nats
from tests.operator.test_chart import (  # noqa: F401
    CHART,
    _render,
    _template_error,
    helm,
    helm_release,
    notes,
)
from tests.operator.test_workflowrun import CRDS
from tests.servers import free_port
from wayline.errors import WorldUnavailableError
from wayline.worlds.nats import NatsWorld
from wayline.worlds.nats.options import parse_url

WORKERS = "workers[0].apps={myapp.flows}"
SPREAD = ("wl-chart-a", "wl-chart-b")  # the namespaced combination's watched namespaces

COMBINATIONS: dict[str, tuple[str, ...]] = {
    "default": (),
    "nats-cluster": ("nats.replicas=3",),  # the generated credentials
    "nats-cluster-auth-tls": (
        "nats.replicas=3",
        "nats.auth.secret=wl-nats-auth",
        "nats.tls.secret=wl-nats-tls",
    ),
    "nats-cluster-nkey": ("nats.replicas=3", "nats.auth.secret=wl-nkey", "nats.auth.type=nkey"),
    "external-world-secret": ("world.urlSecret.name=wl-world",),
    "namespaced-operator-2-replicas": (
        f"operator.namespaces={{{','.join(SPREAD)}}}",
        "operator.replicas=2",
    ),
    "cluster-wide-operator-2-replicas": ("operator.clusterWide=true", "operator.replicas=2"),
    "console": ("console.enabled=true",),
    "console-own-token-over-tls": (
        "console.enabled=true",
        "console.auth.secret=wl-console",
        "console.readOnly=false",
        "nats.tls.secret=wl-nats-tls",
    ),
}


def _values(*values: str) -> list[str]:
    return [a for v in (WORKERS, *values) for a in ("--set", v)]


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _named(docs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    [doc] = [d for d in _by_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    return doc


def _conf(docs: list[dict[str, Any]]) -> str:
    """The rendered nats.conf: a Secret, since the route URLs carry the routes' password."""
    return str(_named(docs, "Secret", "-nats-config")["stringData"]["nats.conf"])


def _route_password(docs: list[dict[str, Any]]) -> str:
    data = _named(docs, "Secret", "-nats-credentials")["data"]
    return base64.b64decode(data["routePassword"]).decode()


def _containers(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for d in _by_kind(docs, "Deployment"):
        yield d["metadata"]["name"], d["spec"]["template"]["spec"]["containers"][0]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_each_combination_lints_renders_and_passes_the_api_servers_dry_run(
    helm: Path,  # noqa: F811
    control_plane: Any,
    tmp_path: Path,
    combination: str,
) -> None:
    values = _values(*COMBINATIONS[combination])
    lint = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "--namespace", "ns1", *values],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    namespace = f"v-{uuid.uuid4().hex[:10]}"
    for ns in (namespace, *SPREAD):
        made = control_plane.kubectl("create", "namespace", ns)
        assert made.returncode == 0 or "AlreadyExists" in made.stderr, made.stderr
    crds = control_plane.kubectl("apply", "-f", str(CRDS))  # kopf's too: (Cluster)KopfPeering
    assert crds.returncode == 0, crds.stderr
    docs = _render(helm, namespace, WORKERS, *COMBINATIONS[combination])
    objects = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", "List")]
    rendered = tmp_path / "rendered.json"
    rendered.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    dry = control_plane.kubectl("apply", "--dry-run=server", "-f", str(rendered))
    assert dry.returncode == 0, dry.stderr  # kubectl names the object it refuses
    accepted = [line for line in dry.stdout.splitlines() if "(server dry run)" in line]
    assert len(accepted) == len(objects), dry.stdout


def test_nats_cluster_with_auth_and_tls_renders_a_clustered_statefulset(
    helm: Path,  # noqa: F811
) -> None:
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["nats-cluster-auth-tls"])
    sts = _named(docs, "StatefulSet", "-nats")
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["podManagementPolicy"] == "Parallel"
    headless = _named(docs, "Service", "-nats-headless")
    assert (
        headless["spec"]["clusterIP"] == "None"
        and sts["spec"]["serviceName"] == (headless["metadata"]["name"])
    )
    assert {p["port"] for p in headless["spec"]["ports"]} == {4222, 6222}
    conf = _conf(docs)
    [route_password] = re.findall(r'password: "(\w{32})"', conf)
    assert _route_password(docs) == route_password
    routes = re.findall(r"nats://route:(\w+)@(\S+):6222", conf)
    assert routes == [
        (route_password, f"t1-wayline-nats-{i}.t1-wayline-nats-headless.ns1.svc") for i in range(3)
    ]
    assert "password: $NATS_PASSWORD" in conf and "cert_file: /etc/nats-tls/tls.crt" in conf
    assert "ca_file: /etc/nats-tls/ca.crt" in conf and "verify: true" in conf  # routes' TLS
    pod = sts["spec"]["template"]["spec"]
    nats_env = _env(pod["containers"][0])
    assert nats_env["NATS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "wl-nats-auth",
        "key": "password",
    }
    assert {"name": "tls", "secret": {"secretName": "wl-nats-tls", "defaultMode": 0o440}} in pod[
        "volumes"
    ]
    for name, container in _containers(docs):
        env = _env(container)
        order = [e["name"] for e in container["env"]]
        # Kubernetes expands $(VAR) only from entries listed before
        assert order.index("NATS_PASSWORD") < order.index("WAYLINE_WORLD"), name
        url = env["WAYLINE_WORLD"]["value"]
        servers, options = parse_url(url)  # as the runtime reads it
        assert servers == [
            f"tls://t1-wayline-nats-{i}.t1-wayline-nats-headless.ns1.svc:4222" for i in range(3)
        ], name
        assert options["replicas"] == 3 and options["prefix"] == "wayline"
        assert options["user"] == "$(NATS_USER)" and options["password"] == "$(NATS_PASSWORD)"
        assert options["tls_ca"] == "/etc/wayline/nats-tls/ca.crt"
        assert {"name": "nats-tls", "mountPath": "/etc/wayline/nats-tls", "readOnly": True} in (
            container["volumeMounts"]
        )
    policy = _named(docs, "NetworkPolicy", "-nats")
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nats"
    clients, peers = policy["spec"]["ingress"]
    admitted = {
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in clients["from"]
    }
    assert admitted == {"operator", "worker"} and clients["ports"] == [
        {"port": "client", "protocol": "TCP"}
    ]
    assert [
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in peers["from"]
    ] == ["nats"]


def test_nkey_auth_mounts_the_seed_and_names_it_in_the_url(helm: Path) -> None:  # noqa: F811
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["nats-cluster-nkey"])
    conf = _conf(docs)
    assert "users: [{nkey: $NATS_NKEY}]" in conf
    for name, container in _containers(docs):
        servers, options = parse_url(_env(container)["WAYLINE_WORLD"]["value"])
        assert all(s.startswith("nats://") for s in servers) and "user" not in options
        assert options["nkeys_seed"] == "/etc/wayline/nats-auth/seed", name
        assert "NATS_PASSWORD" not in _env(container)


def test_a_world_url_from_a_secret_installs_no_nats(helm: Path) -> None:  # noqa: F811
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["external-world-secret"])
    assert not [d for d in docs if "nats" in d.get("metadata", {}).get("name", "")]
    assert not _by_kind(docs, "StatefulSet")
    # the operator's and the workers' policies stay; the operator reaches any address for
    # a world the chart does not know
    operator = _named(docs, "NetworkPolicy", "-operator")
    assert operator["spec"]["egress"][-1] == {}
    assert {p["metadata"]["name"] for p in _by_kind(docs, "NetworkPolicy")} == {
        "t1-wayline-operator",
        "t1-wayline-workers",
    }
    names = set()
    for name, container in _containers(docs):
        names.add(name)
        ref = _env(container)["WAYLINE_WORLD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "wl-world", "key": "url"}, name
    assert names == {"t1-wayline-operator", "t1-wayline-worker-default"}


def test_a_namespaced_operator_gets_roles_and_peering_and_reads_only_cluster_wide(
    helm: Path,  # noqa: F811
) -> None:
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["namespaced-operator-2-replicas"])
    [discovery] = _by_kind(docs, "ClusterRole")  # kopf's scanning: read-only, nothing else
    assert discovery["metadata"]["name"] == "t1-wayline-operator-discovery"
    assert {v for r in discovery["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    assert {r for rule in discovery["rules"] for r in rule["resources"]} == {
        "namespaces",
        "customresourcedefinitions",
    }
    [binding] = _by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == discovery["metadata"]["name"]
    assert not _by_kind(docs, "ClusterKopfPeering")
    for kind in ("Role", "RoleBinding", "KopfPeering"):
        assert sorted(d["metadata"]["namespace"] for d in _by_kind(docs, kind)) == list(SPREAD)
    for role in _by_kind(docs, "Role"):
        resources = {r for rule in role["rules"] for r in rule["resources"]}
        assert {"workflowruns", "workflowruns/status", "events", "kopfpeerings"} <= resources
    for binding in _by_kind(docs, "RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "t1-wayline-operator", "namespace": "ns1"}
        ]
    operator = _named(docs, "Deployment", "-operator")
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith(("--namespace", "--peering"))] == [
        f"--namespace={SPREAD[0]}",
        f"--namespace={SPREAD[1]}",
        "--peering=t1-wayline",
        "--peering-lifetime=6",  # the chart's failover bound (test_operator_ops.py measures it)
    ]
    assert {d["metadata"]["name"] for d in _by_kind(docs, "KopfPeering")} == {"t1-wayline"}
    assert (
        operator["spec"]["replicas"] == 2
        and operator["spec"]["strategy"]["type"] == "RollingUpdate"
    )
    assert _named(docs, "PodDisruptionBudget", "-operator")["spec"]["maxUnavailable"] == 1


def test_a_cluster_wide_operator_with_replicas_peers_cluster_wide(helm: Path) -> None:  # noqa: F811
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["cluster-wide-operator-2-replicas"])
    [peering] = _by_kind(docs, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == "t1-wayline" and "namespace" not in peering["metadata"]
    [role] = _by_kind(docs, "ClusterRole")
    assert any("clusterkopfpeerings" in r["resources"] for r in role["rules"])
    single = _render(helm, "ns1", WORKERS)  # one replica: standalone, no peering at all
    assert not _by_kind(single, "ClusterKopfPeering")
    assert not any("--peering" in a for _, c in _containers(single) for a in c["args"])


def test_the_values_refuse_more_stream_replicas_than_nats_nodes(helm: Path) -> None:  # noqa: F811
    error = _template_error(helm, *_values("world.replicas=3"))
    assert "world.replicas=3" in error and "nats.replicas=1" in error
    assert "replicas" in _template_error(helm, *_values("nats.replicas=2"))  # 1, 3 or 5
    assert "type" in _template_error(helm, *_values("nats.auth.type=token"))
    docs = _render(helm, "ns1", WORKERS, "nats.replicas=3", "world.replicas=1")
    [(_, c), *_] = list(_containers(docs))
    assert parse_url(_env(c)["WAYLINE_WORLD"]["value"])[1]["replicas"] == 1


# The rendered configuration on real nats-servers ------------------------------------------------


def _local_conf(
    conf: str,
    node: int,
    http: int,
    routes: list[int],
    store: Path,
    pki: Path,  # noqa: F811
) -> str:
    """The rendered nats.conf with loopback addresses (NatsServer gives the client port with
    -a 127.0.0.1 -p), a temporary store, the test's certificate, and the peers' route ports in
    place of their DNS names."""
    conf = conf.replace("http_port: 8222", f"http: 127.0.0.1:{http}")
    conf = conf.replace("store_dir: /data", f"store_dir: {store}")
    conf = conf.replace("/etc/nats-tls/tls.crt", str(pki / "ip.pem"))
    conf = conf.replace("/etc/nats-tls/tls.key", str(pki / "srv.key"))
    conf = conf.replace("/etc/nats-tls/ca.crt", str(pki / "ca.pem"))
    if routes:
        conf = conf.replace("port: 6222", f"listen: 127.0.0.1:{routes[node]}")
        conf = re.sub(
            r"nats://(route:\w+@)t1-wayline-nats-(\d)\.\S+:6222",
            lambda m: f"nats://{m.group(1)}127.0.0.1:{routes[int(m.group(2))]}",
            conf,
        )
    assert "6222" not in conf and "/data" not in conf and "/etc/" not in conf, conf
    return conf


def _world_url(
    container: dict[str, Any],
    ports: list[int],
    env: dict[str, str],
    pki: Path,  # noqa: F811
) -> str:
    """The pod's WAYLINE_WORLD as Kubernetes expands it, pointed at the local servers."""
    url = str(_env(container)["WAYLINE_WORLD"]["value"])
    for name, value in env.items():
        url = url.replace(f"$({name})", value)
    url = re.sub(
        r"t1-wayline-nats-(\d)\.t1-wayline-nats-headless\.ns1\.svc:4222",
        lambda m: f"127.0.0.1:{ports[int(m.group(1))]}",
        url,
    )
    url = url.replace("t1-wayline-nats.ns1.svc:4222", f"127.0.0.1:{ports[0]}")
    return url.replace("/etc/wayline/nats-tls/ca.crt", str(pki / "ca.pem"))


def _start_nodes(
    docs: list[dict[str, Any]],
    pki: Path,  # noqa: F811
    tmp_path: Path,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> list[NatsServer]:
    """The chart's StatefulSet on this machine: as many nats-servers as its replicas, each
    with the rendered configuration and the environment its pod gets from the Secret."""
    sts = _named(docs, "StatefulSet", "-nats")
    conf = _conf(docs)
    replicas = int(sts["spec"]["replicas"])
    routes = [free_port() for _ in range(replicas)] if replicas > 1 else []
    nodes: list[NatsServer] = []
    https: list[int] = []
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        for i in range(replicas):
            store = tmp_path / f"node{i}"
            store.mkdir()
            http = free_port()
            path = store / "nats.conf"
            path.write_text(_local_conf(conf, i, http, routes, store / "js", pki))
            monkeypatch.setenv("SERVER_NAME", f"t1-wayline-nats-{i}")  # as the pod's name
            node = NatsServer(require_nats(), store, jetstream=False, args=["-c", str(path)])
            node.start()
            nodes.append(node)
            https.append(http)
        probe = sts["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
        for http in https:  # the chart's readiness probe, as the kubelet asks it
            _wait_ready(f"http://127.0.0.1:{http}{probe['path']}")
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def _wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError as err:
            last = str(err)
        time.sleep(0.2)
    raise AssertionError(f"{url} not ready: {last}")


async def test_the_rendered_nats_with_password_and_tls_serves_the_rendered_world_url(
    helm: Path,  # noqa: F811
    pki: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = _render(helm, "ns1", WORKERS, "nats.auth.secret=a", "nats.tls.secret=t")
    secret = {"NATS_USER": "wayline", "NATS_PASSWORD": uuid.uuid4().hex}
    [node] = _start_nodes(docs, pki, tmp_path, secret, monkeypatch)
    try:
        [(_, worker)] = [(n, c) for n, c in _containers(docs) if "worker" in n]
        url = _world_url(worker, [node.port], secret, pki)
        assert url.startswith("tls://wayline:")
        world = NatsWorld.from_url(url)
        await world.start()
        try:
            mid = await world.enqueue("flow", {"x": 1})
            [d] = await world.receive("flow", wait_seconds=2)
            assert d.message_id == mid
            await world.ack(d)
        finally:
            await world.close()
        wrong = NatsWorld.from_url(
            _world_url(worker, [node.port], {**secret, "NATS_PASSWORD": "wrong"}, pki),
            connect_attempts=1,
        )
        with pytest.raises(WorldUnavailableError):
            await wrong.start()
        await wrong.close()
    finally:
        node.stop()


async def test_the_rendered_nats_with_an_nkey_serves_the_rendered_world_url(
    helm: Path,  # noqa: F811
    pki: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nkeys

    docs = _render(helm, "ns1", WORKERS, "nats.auth.secret=a", "nats.auth.type=nkey")
    seeds = [nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER) for _ in range(2)]
    public = nkeys.from_seed(seeds[0]).public_key.decode()
    for i, seed in enumerate(seeds):
        (tmp_path / f"seed{i}").write_bytes(seed)  # the Secret's seed key, as mounted
    [node] = _start_nodes(docs, pki, tmp_path, {"NATS_NKEY": public}, monkeypatch)
    try:
        [(_, worker)] = [(n, c) for n, c in _containers(docs) if "worker" in n]
        url = _world_url(worker, [node.port], {}, pki)
        assert "/etc/wayline/nats-auth/seed" in url
        world = NatsWorld.from_url(
            url.replace("/etc/wayline/nats-auth/seed", str(tmp_path / "seed0"))
        )
        await world.start()
        try:
            mid = await world.enqueue("flow", {"x": 1})
            [d] = await world.receive("flow", wait_seconds=2)
            assert d.message_id == mid
            await world.ack(d)
        finally:
            await world.close()
        other = url.replace("/etc/wayline/nats-auth/seed", str(tmp_path / "seed1"))
        wrong = NatsWorld.from_url(other, connect_attempts=1)  # a seed the server does not know
        with pytest.raises(WorldUnavailableError):
            await wrong.start()
        await wrong.close()
    finally:
        node.stop()


async def test_three_rendered_nats_nodes_form_a_cluster_and_streams_get_three_replicas(
    helm: Path,  # noqa: F811
    pki: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nats

    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS["nats-cluster-auth-tls"])
    secret = {"NATS_USER": "wayline", "NATS_PASSWORD": uuid.uuid4().hex}
    nodes = _start_nodes(docs, pki, tmp_path, secret, monkeypatch)
    try:
        [(_, operator)] = [(n, c) for n, c in _containers(docs) if n.endswith("-operator")]
        url = _world_url(operator, [n.port for n in nodes], secret, pki)
        world = NatsWorld.from_url(url, connect_attempts=10)
        for _attempt in range(30):  # the meta leader may still be elected after /healthz
            try:
                await world.start()
                break
            except Exception:
                await world.close()
                world = NatsWorld.from_url(url, connect_attempts=10)
                await asyncio.sleep(0.5)
        else:
            raise AssertionError("the world never started on the rendered cluster")
        try:
            mid = await world.enqueue("flow", {"x": 1})
            [d] = await world.receive("flow", wait_seconds=5)
            assert d.message_id == mid
            await world.ack(d)
        finally:
            await world.close()
        ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        nc = await nats.connect(
            f"tls://127.0.0.1:{nodes[2].port}",
            user=secret["NATS_USER"],
            password=secret["NATS_PASSWORD"],
            tls=ctx,
        )
        try:
            streams = await nc.jetstream().streams_info()
            ours = {i.config.name: i for i in streams if i.config.name.startswith("wayline_")}
            # the event log, queue, dead letters; KV buckets are streams too (KV_wayline_...)
            ours |= {i.config.name: i for i in streams if i.config.name.startswith("KV_wayline")}
            assert {"wayline_events", "wayline_queue", "KV_wayline_hooks"} <= set(ours), ours
            for name, info in ours.items():
                assert info.config.num_replicas == 3, name
                assert info.cluster is not None and info.cluster.name == "t1-wayline"
                peers = {info.cluster.leader, *(r.name for r in info.cluster.replicas or [])}
                assert peers == {f"t1-wayline-nats-{i}" for i in range(3)}, (name, peers)
        finally:
            await nc.close()
    finally:
        for node in nodes:
            node.stop()


def test_the_default_install_generates_nats_credentials_and_every_pod_uses_them(
    helm: Path,  # noqa: F811
) -> None:
    docs = _render(helm, "ns1", WORKERS)
    data = _named(docs, "Secret", "-nats-credentials")["data"]
    user, password = (base64.b64decode(data[k]).decode() for k in ("user", "password"))
    assert user == "wayline" and re.fullmatch(r"\w{32}", password), password
    assert "password: $NATS_PASSWORD" in _conf(docs) and "cluster {" not in _conf(docs)
    for name, container in _containers(docs):
        env = _env(container)
        ref = env["NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "t1-wayline-nats-credentials", "key": "password"}, name
        _, options = parse_url(env["WAYLINE_WORLD"]["value"])
        assert options["user"] == "$(NATS_USER)" and options["password"] == "$(NATS_PASSWORD)"
    # the operator goes out to DNS, the API server and the chart's NATS only; the workers
    # anywhere (their steps call outside systems); nothing comes in to either but probes and
    # the metrics scrape
    operator = _named(docs, "NetworkPolicy", "-operator")["spec"]
    assert operator["policyTypes"] == ["Ingress", "Egress"]
    admitted = [{"port": "liveness", "protocol": "TCP"}, {"port": "metrics", "protocol": "TCP"}]
    assert operator["ingress"] == [{"ports": admitted}]
    dns, api, nats = operator["egress"]
    assert {p["port"] for p in dns["ports"]} == {53} and "to" not in dns
    assert [p["port"] for p in api["ports"]] == [443, 6443]
    [to] = nats["to"]
    assert to["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "nats"
    assert nats["ports"] == [{"port": 4222, "protocol": "TCP"}]
    workers = _named(docs, "NetworkPolicy", "-workers")["spec"]
    assert workers["policyTypes"] == ["Ingress"] and "egress" not in workers
    assert workers["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "worker"
    restricted = _render(helm, "ns1", WORKERS, "networkPolicy.workerEgress[0].ports[0].port=443")
    workers = _named(restricted, "NetworkPolicy", "-workers")["spec"]
    assert workers["policyTypes"] == ["Ingress", "Egress"]
    assert workers["egress"][-1] == {"ports": [{"port": 443}]} and len(workers["egress"]) == 3


def test_without_generated_credentials_nats_lets_anyone_in_and_the_notes_warn(
    helm: Path,  # noqa: F811
    control_plane: Any,
) -> None:
    docs = _render(helm, "ns1", WORKERS, "nats.auth.generate=false")
    assert "authorization" not in _conf(docs)
    assert "user" not in _named(docs, "Secret", "-nats-credentials")["data"]
    for name, container in _containers(docs):
        assert "NATS_PASSWORD" not in _env(container), name
    done = subprocess.run(
        [
            *(str(helm), "install", f"--kubeconfig={control_plane.kubeconfig}", "open"),
            *(str(CHART), "--dry-run=client", "--namespace", "ns1"),
            *_values("nats.auth.generate=false"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING: nats.auth.generate=false and no nats.auth.secret" in done.stdout
    error = _template_error(helm, *_values("nats.auth.type=nkey"))
    assert "nats.auth.type=nkey needs nats.auth.secret" in error


def test_the_generated_credentials_are_kept_across_upgrades(
    helm: Path,  # noqa: F811
    control_plane: Any,
) -> None:
    """A real install and upgrade on the API server: the upgrade reads the Secret back
    (helm's lookup) instead of generating new passwords under running pods."""
    namespace = f"creds-{uuid.uuid4().hex[:8]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0

    def helm_run(verb: str, *values: str) -> None:
        helm_release(helm, control_plane, verb, "creds", namespace, WORKERS, *values)

    def stored() -> tuple[dict[str, str], str]:
        got = control_plane.kubectl(
            "-n", namespace, "get", "secret", "-o", "json",
            "creds-wayline-nats-credentials", "creds-wayline-nats-config",
        )  # fmt: skip
        assert got.returncode == 0, got.stderr
        credentials, config = json.loads(got.stdout)["items"]
        conf = base64.b64decode(config["data"]["nats.conf"]).decode()
        return credentials["data"], conf

    try:
        helm_run("install")
        first, _ = stored()
        assert set(first) == {"user", "password", "routePassword"}
        helm_run("upgrade", "nats.replicas=3")
        again, conf = stored()
        assert again == first
        route_password = base64.b64decode(first["routePassword"]).decode()
        assert f"nats://route:{route_password}@creds-wayline-nats-0." in conf
    finally:
        subprocess.run(
            [str(helm), "uninstall", f"--kubeconfig={control_plane.kubeconfig}", "creds",
             "--namespace", namespace],
            capture_output=True,
            timeout=120,
        )  # fmt: skip
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


async def _start_world_on(nodes: list[NatsServer], url: str) -> None:
    """Creates the world's streams on a fresh cluster (its meta leader may still be elected
    after /healthz answers), then writes one message to the queue."""
    for _attempt in range(30):
        world = NatsWorld.from_url(url, connect_attempts=10)
        try:
            await world.start()
            await world.enqueue("flow", {"x": 1})
            return
        except Exception:
            await asyncio.sleep(0.5)
        finally:
            await world.close()
    raise AssertionError("the world never started on the rendered cluster")


def _node_ports(node: NatsServer) -> tuple[int, int]:
    """(route port, monitoring port) of a node that _start_nodes started, from its config."""
    conf = (node.store / "nats.conf").read_text()
    route = re.search(r"listen: 127\.0\.0\.1:(\d+)", conf)
    http = re.search(r"http: 127\.0\.0\.1:(\d+)", conf)
    assert route and http, conf
    return int(route.group(1)), int(http.group(1))


def _route_names(http: int) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/routez", timeout=5) as answer:
        routez = json.load(answer)
    return {str(r.get("remote_name", "")) for r in routez.get("routes") or []}


async def _stray_reads_the_log(stray: NatsServer) -> bool:
    """Whether a client of the stray server, with no credentials, reaches the event log."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import ServiceUnavailableError

    import nats

    nc = await nats.connect(stray.url, connect_timeout=2, allow_reconnect=False)
    try:
        for _attempt in range(10):  # a joining server learns the cluster's interest in a moment
            try:
                info = await nc.jetstream(timeout=1).stream_info("wayline_events")
                return info.config.name == "wayline_events"
            except (NoRespondersError, NatsTimeout, ServiceUnavailableError):
                await asyncio.sleep(0.3)
        return False
    finally:
        await nc.close()


@pytest.mark.parametrize("combination", ["nats-cluster", "nats-cluster-auth-tls"])
async def test_a_stray_server_that_knows_only_the_route_addresses_cannot_join(
    helm: Path,  # noqa: F811
    pki: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    combination: str,
) -> None:
    """A server started elsewhere with ``--routes`` at the nodes' cluster port (and no
    password) is refused, so a client of it, with no credentials, reads nothing of the world;
    on the cluster without TLS the same server given the routes' password joins and reads the
    log, so it is the password that keeps it out."""
    docs = _render(helm, "ns1", WORKERS, *COMBINATIONS[combination])
    if combination == "nats-cluster-auth-tls":
        secret = {"NATS_USER": "wayline", "NATS_PASSWORD": uuid.uuid4().hex}
    else:  # the Secret the chart generated
        data = _named(docs, "Secret", "-nats-credentials")["data"]
        secret = {
            "NATS_USER": base64.b64decode(data["user"]).decode(),
            "NATS_PASSWORD": base64.b64decode(data["password"]).decode(),
        }
    nodes = _start_nodes(docs, pki, tmp_path, secret, monkeypatch)
    strays: list[NatsServer] = []
    try:
        [(_, operator)] = [(n, c) for n, c in _containers(docs) if n.endswith("-operator")]
        await _start_world_on(nodes, _world_url(operator, [n.port for n in nodes], secret, pki))
        route, http = _node_ports(nodes[0])
        peers = _route_names(http)
        assert peers == {"t1-wayline-nats-1", "t1-wayline-nats-2"}, peers

        def stray(name: str, route_url: str) -> NatsServer:
            store = tmp_path / name
            store.mkdir()
            args = ["-n", name, "--cluster_name", "t1-wayline"]
            args += ["--cluster", f"nats://127.0.0.1:{free_port()}", "--routes", route_url]
            server = NatsServer(require_nats(), store, jetstream=False, args=args)
            server.start()
            strays.append(server)
            return server

        bare = stray("stray", f"nats://127.0.0.1:{route}")
        assert not await _stray_reads_the_log(bare)
        assert _route_names(http) == peers
        if combination == "nats-cluster-auth-tls":
            return
        password = _route_password(docs)
        told = stray("told", f"nats://route:{password}@127.0.0.1:{route}")
        assert await _stray_reads_the_log(told)  # the harm the password prevents
        assert "told" in _route_names(http)
    finally:
        for server in [*strays, *nodes]:
            server.stop()


def test_the_notes_name_the_cluster_the_secrets_and_the_peering(
    helm: Path,  # noqa: F811
    control_plane: Any,
) -> None:
    def notes_of(*values: str) -> str:
        return notes(helm, control_plane, WORKERS, *values)

    text = notes_of(*COMBINATIONS["nats-cluster-auth-tls"], "operator.replicas=2")
    assert "NATS: 3 node(s), streams with 3 replica(s), password authentication" in text
    assert "wait for these Secrets in ns1: wl-nats-auth, wl-nats-tls" in text
    assert 'kopf peering "notes-wayline"' in text and "WARNING" not in text
    assert "WARNING: world.replicas=1 on a 3-node cluster" in notes_of(
        "nats.replicas=3", "world.replicas=1"
    )
    external = notes_of(*COMBINATIONS["external-world-secret"])
    assert "world: (from Secret wl-world, key url)" in external
