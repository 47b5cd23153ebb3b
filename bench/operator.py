"""The operator at scale: N WorkflowRuns of a 3-step workflow on a real kube-apiserver + etcd
(``tests/operator/control_plane.py``), the NATS world on a real nats-server, two worker
processes and the operator in its own process, as a cluster runs them.

    python bench/operator.py [--runs 10000] [--idle 30] [--write]

Prints: the time until every resource says ``completed`` (from the first create); the API
server's requests per second by verb during that time and during an idle window after it
(deltas of its own ``apiserver_request_total``); the operator's CPU seconds and peak RSS
(with the other processes' CPU for comparison); and the status lag, the time between a run's
end in its log (the ``run_completed`` stamp) and the watch event that shows its resource
``completed`` (p50/p99). Resources are created and watched with the official ``kubernetes``
client, as a Python user would. ``--write`` puts the figures under their own heading in
``bench/RESULTS.md``.
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see below)

from __future__ import annotations

import sys

# run as a script, this file's folder comes first on sys.path, and this file is named like the
# standard library's ``operator``: take the folder off before anything imports that
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.nats_server import nats_server
from bench.results import write_section
from tests.operator.control_plane import ControlPlane, default_bin_dir

import wayline

APP = ROOT / "bench" / "operator_app.py"
HEADING = "## The operator at scale (bench/operator.py)"
GROUP, VERSION, PLURAL = "wayline.dev", "v1alpha1", "workflowruns"
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_TICK = os.sysconf("SC_CLK_TCK")


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def requests(plane: ControlPlane) -> Counter[tuple[str, str]]:
    """apiserver_request_total by (verb, resource[/subresource])."""
    text = plane.kubectl("get", "--raw", "/metrics").stdout
    out: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
        what = labels.get("resource", "") + (
            "/" + labels["subresource"] if labels.get("subresource") else ""
        )
        out[(labels.get("verb", ""), what)] += int(float(m["value"]))
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Watcher(threading.Thread):
    """Watches the namespace's WorkflowRuns; records when each was first seen completed."""

    def __init__(self, api: Any, namespace: str) -> None:
        super().__init__(daemon=True)
        self.api, self.namespace = api, namespace
        self.completed: dict[str, float] = {}
        self.uids: dict[str, str] = {}
        self.events = 0
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        from kubernetes import watch

        version = ""
        while not self.stop.is_set():
            w = watch.Watch()
            kwargs: dict[str, Any] = {"timeout_seconds": 30, "allow_watch_bookmarks": True}
            if version:
                kwargs["resource_version"] = version
            self.ready.set()
            try:
                for ev in w.stream(
                    self.api.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    **kwargs,
                ):
                    now = time.time()
                    obj = ev["object"]
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion") or version
                    if ev["type"] == "BOOKMARK":
                        continue
                    self.events += 1
                    name = meta.get("name")
                    self.uids.setdefault(name, meta.get("uid"))
                    phase = (obj.get("status") or {}).get("phase")
                    if phase == "completed" and name not in self.completed:
                        self.completed[name] = now
                    if self.stop.is_set():
                        break
            except Exception as err:
                # An expired version (410) starts over from a fresh list; a connection that
                # ended early resumes where it was: a relist of thousands of resources would
                # count its own duration as the lag of every run that ended meanwhile.
                expired = getattr(err, "status", None) == 410 or "too old" in str(err)
                print(
                    f"  (watch restarted{' from a list' if expired else ''}: {err})",
                    file=sys.stderr,
                )
                if expired:
                    version = ""


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def by_verb(before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for key, value in after.items():
        delta = value - before.get(key, 0)
        if delta:
            out[key[0]] += delta
    return out


def by_resource(
    before: Counter[tuple[str, str]], after: Counter[tuple[str, str]]
) -> list[tuple[str, int]]:
    out = {
        f"{verb} {what}": value - before.get((verb, what), 0)
        for (verb, what), value in after.items()
        if value - before.get((verb, what), 0) > 0
    }
    return sorted(out.items(), key=lambda kv: -kv[1])


async def run_ends(url: str, uids: dict[str, str], limit: int) -> dict[str, float]:
    """Each resource's run end (the ``run_completed`` stamp), by resource name: a run's
    business id is its resource's name."""
    world = wayline.open_world(url)
    async with world:
        runs = await world.list_runs(limit=limit)
    ends = {r.business_id: r.ended_at for r in runs if r.ended_at is not None}
    return {name: ends[name] for name in uids if ends.get(name) is not None}


def bench(opts: argparse.Namespace) -> dict[str, Any]:
    import kubernetes

    n = opts.runs
    tmp = Path(tempfile.mkdtemp(prefix="wayline-bench-operator-"))
    figures: dict[str, Any] = {"runs": n}
    with ExitStack() as stack:
        plane = ControlPlane(default_bin_dir())
        plane.start()
        stack.callback(plane.stop)
        done = plane.kubectl("apply", "-f", str(ROOT / "crds"))
        assert done.returncode == 0, done.stderr
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        namespace = "bench"
        plane.kubectl("create", "namespace", namespace)
        url = stack.enter_context(nats_server()) + "?prefix=bench"
        env = {
            **os.environ,
            "WAYLINE_WORLD": url,
            "KUBECONFIG": str(plane.kubeconfig),
        }
        operator = stack.enter_context(
            process(
                [
                    sys.executable,
                    *(["-m", "cProfile", "-o", opts.profile] if opts.profile else []),
                    "-m",
                    "wayline_operator",
                    "--namespace",
                    namespace,
                ],
                env,
                tmp / "operator.log",
            )
        )
        workers = [
            stack.enter_context(
                process(
                    [
                        sys.executable,
                        "-m",
                        "wayline.cli",
                        "worker",
                        "--app",
                        str(APP),
                        "--processes",
                        "1",
                    ],
                    env,
                    tmp / f"worker{i}.log",
                )
            )
            for i in range(2)
        ]
        time.sleep(5.0)  # the world provisioned, the operator listed and watching

        kubernetes.config.load_kube_config(config_file=str(plane.kubeconfig))  # type: ignore[no-untyped-call]
        api = kubernetes.client.CustomObjectsApi()
        watcher = Watcher(kubernetes.client.CustomObjectsApi(), namespace)
        watcher.start()
        watcher.ready.wait(10)
        time.sleep(0.5)
        pids = {
            "operator": operator.pid,
            "worker 1": workers[0].pid,
            "worker 2": workers[1].pid,
            "kube-apiserver": plane.procs["kube-apiserver"].pid,
            "etcd": plane.procs["etcd"].pid,
        }
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        before = requests(plane)
        t0 = time.time()

        def create(i: int) -> None:
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "WorkflowRun",
                "metadata": {"name": f"r{i:05d}"},
                "spec": {"workflow": "bench_three", "input": [i]},
            }
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

        with ThreadPoolExecutor(opts.create_threads) as pool:
            list(pool.map(create, range(n)))
        created = time.time() - t0
        print(f"created {n} WorkflowRuns in {created:.1f}s", flush=True)
        deadline = time.monotonic() + opts.timeout
        last = 0.0
        while len(watcher.completed) < n and time.monotonic() < deadline:
            time.sleep(0.5)
            if time.monotonic() - last > 15:
                last = time.monotonic()
                print(f"  {len(watcher.completed)}/{n} completed", flush=True)
        t_end = max(watcher.completed.values()) if watcher.completed else time.time()
        after = requests(plane)
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        elapsed = t_end - t0
        figures.update(
            completed=len(watcher.completed),
            created_seconds=created,
            all_completed_seconds=elapsed,
            rates={v: c / elapsed for v, c in by_verb(before, after).most_common()},
            top=[(k, v, v / elapsed) for k, v in by_resource(before, after)[:8]],
            cpu={k: cpu1[k] - cpu0[k] for k in pids},
        )
        # idle: every resource exists, no run moves; the resync reads, writes nothing
        idle0 = requests(plane)
        cpu_idle0 = cpu_seconds(operator.pid)
        time.sleep(opts.idle)
        idle1 = requests(plane)
        figures["idle"] = {
            "seconds": opts.idle,
            "rates": {v: c / opts.idle for v, c in by_verb(idle0, idle1).most_common()},
            "writes": [(k, v) for k, v in by_resource(idle0, idle1) if k.split()[0] != "GET"],
            "operator_cpu": cpu_seconds(operator.pid) - cpu_idle0,
        }
        figures["operator_peak_rss_mb"] = peak_rss_mb(operator.pid)
        watcher.stop.set()
        ends = asyncio.run(run_ends(url, dict(watcher.uids), n + 100))
        lags = [watcher.completed[k] - ends[k] for k in watcher.completed if k in ends]
        figures["lag"] = {
            "n": len(lags),
            "p50": pct(lags, 0.5) if lags else None,
            "p99": pct(lags, 0.99) if lags else None,
            "max": max(lags) if lags else None,
        }
        figures["watch_events"] = watcher.events
        log_text = (tmp / "operator.log").read_text(errors="replace")
        figures["kopf_creations"] = log_text.count("Creation is processed")
        figures["logs"] = str(tmp)
        (tmp / "lags.json").write_text(
            json.dumps(
                {
                    k: [ends[k] - t0, watcher.completed[k] - t0]
                    for k in ends
                    if k in watcher.completed
                }
            )
        )
    return figures


def report(f: dict[str, Any]) -> list[str]:
    lag = f["lag"]
    lines = [
        f"{f['runs']} WorkflowRuns of a 3-step workflow (`bench/operator_app.py`), two worker "
        "processes, NATS world, operator defaults (at most one status write per run per "
        "second, 100 writes/s, resync every 300 s).",
        "",
        f"- all `completed` {f['all_completed_seconds']:.1f} s after the first create "
        f"(creating them took {f['created_seconds']:.1f} s; {f['completed']} completed)",
        f"- status lag, run end in the log to `completed` seen on a watch: p50 "
        f"{lag['p50']:.2f} s, p99 {lag['p99']:.2f} s, max {lag['max']:.2f} s ({lag['n']} runs)",
        "- API server requests/s during the run, by verb: "
        + ", ".join(f"{v} {r:.1f}" for v, r in f["rates"].items()),
        "- the most frequent: " + ", ".join(f"{k} {r:.1f}/s" for k, _, r in f["top"]),
        "- API writes per run: " + writes_per_run(f["top"], f["runs"]),
        f"- idle for {f['idle']['seconds']} s afterwards ({f['runs']} resources exist, none "
        "moves): requests/s by verb "
        + (", ".join(f"{v} {r:.2f}" for v, r in f["idle"]["rates"].items()) or "none")
        + "; writes: "
        + (", ".join(f"{k} {v}" for k, v in f["idle"]["writes"]) or "none")
        + f"; operator CPU {f['idle']['operator_cpu']:.2f} s",
        "- CPU seconds during the run: "
        + ", ".join(f"{k} {v:.1f}" for k, v in f["cpu"].items())
        + f"; operator peak RSS {f['operator_peak_rss_mb']:.0f} MB",
        f"- kopf handled {f['kopf_creations']} creations for {f['runs']} resources",
    ]
    return lines


_WRITES = ("POST", "PATCH", "PUT", "DELETE")


def writes_per_run(top: Sequence[Sequence[Any]], runs: int) -> str:
    """Writes to WorkflowRuns and Events per run (the create included), and by kind."""
    mine = [
        (str(k), int(c))
        for k, c, _ in top
        if str(k).split(" ")[0] in _WRITES
        and str(k).split(" ")[1].split("/")[0] in ("workflowruns", "events")
    ]
    total = sum(c for _, c in mine) / max(1, runs)
    return f"{total:.2f} (" + ", ".join(f"{k} {c / max(1, runs):.2f}" for k, c in mine) + ")"


def write(lines: list[str], note: str) -> None:
    write_section(HEADING, "`bench/operator.py`", lines, note)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python bench/operator.py")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--idle", type=float, default=30.0, help="idle window (seconds)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--create-threads", type=int, default=4)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--note", default="", help="a line for RESULTS.md")
    parser.add_argument("--profile", help="run the operator under cProfile, stats to this file")
    opts = parser.parse_args()
    figures = bench(opts)
    lines = report(figures)
    print("\n".join(lines))
    print(json.dumps(figures, default=str))
    if opts.write:
        write(lines, opts.note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
