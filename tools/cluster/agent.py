"""The local cluster's node agent (tools/cluster/up.sh starts it inside the cluster's network
namespace; down.sh stops it by pid). Two stand-ins, driven through kubectl once a second:

- cluster DNS records: a hosts file for dnsmasq (which watches the directory) with every
  Service's ``NAME.NAMESPACE.svc.cluster.local`` (headless ones: their endpoint addresses) and
  every pod with ``hostname``/``subdomain`` (a StatefulSet's pods);
- a PersistentVolume provisioner: the default StorageClass ``standard`` (kind's name, so
  values files work on both), and for each pending claim of it a hostPath PersistentVolume
  under ``--pv-dir``, bound to the claim. Volumes outlive their pods (that is the point) and go
  with the cluster's state directory.

Standard library only: it runs with the machine's python3, outside the project's venv.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STORAGE_CLASS = "standard"
PROVISIONER = "wayline.local/hostpath"


class Agent:
    def __init__(self, kubectl: str, kubeconfig: str, dns_dir: Path, pv_dir: Path) -> None:
        self.base = [kubectl, f"--kubeconfig={kubeconfig}"]
        self.dns_file = dns_dir / "cluster.hosts"
        self.pv_dir = pv_dir
        self.hosts = ""

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [*self.base, *args], input=stdin, capture_output=True, text=True, timeout=30
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def storage_class(self) -> None:
        self.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {
                        "name": STORAGE_CLASS,
                        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                    },
                    "provisioner": PROVISIONER,
                    "reclaimPolicy": "Retain",
                    "volumeBindingMode": "Immediate",
                }
            ),
        )

    def sync(self) -> None:
        items = json.loads(self.kubectl("get", "svc,endpointslices,pods,pvc", "-A", "-o", "json"))
        objects: dict[str, list[dict[str, Any]]] = {}
        for item in items["items"]:
            objects.setdefault(item["kind"], []).append(item)
        self.write_hosts(objects)
        for claim in objects.get("PersistentVolumeClaim", []):
            self.provision(claim)

    def write_hosts(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        lines: list[str] = []
        headless: set[tuple[str, str]] = set()
        for svc in objects.get("Service", []):
            meta, ip = svc["metadata"], svc["spec"].get("clusterIP")
            name = f"{meta['name']}.{meta['namespace']}.svc.cluster.local"
            if ip and ip != "None":
                lines.append(f"{ip} {name}")
            else:
                headless.add((meta["namespace"], meta["name"]))
        for eps in objects.get("EndpointSlice", []):
            meta = eps["metadata"]
            svc_name = meta.get("labels", {}).get("kubernetes.io/service-name")
            if (meta["namespace"], svc_name) in headless:
                for ep in eps.get("endpoints") or []:
                    if (ep.get("conditions") or {}).get("ready", True):
                        for address in ep.get("addresses", []):
                            lines.append(
                                f"{address} {svc_name}.{meta['namespace']}.svc.cluster.local"
                            )
        for pod in objects.get("Pod", []):
            spec, ip = pod["spec"], pod.get("status", {}).get("podIP")
            if ip and spec.get("hostname") and spec.get("subdomain"):
                ns = pod["metadata"]["namespace"]
                lines.append(f"{ip} {spec['hostname']}.{spec['subdomain']}.{ns}.svc.cluster.local")
        hosts = "\n".join(sorted(set(lines))) + "\n"
        if hosts != self.hosts:
            tmp = self.dns_file.with_suffix(".tmp")
            tmp.write_text(hosts)
            os.replace(tmp, self.dns_file)  # dnsmasq (--hostsdir) reloads on the rename
            self.hosts = hosts

    def provision(self, claim: dict[str, Any]) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        if claim.get("status", {}).get("phase") != "Pending" or spec.get("volumeName"):
            return
        if spec.get("storageClassName") != STORAGE_CLASS:
            return
        path = self.pv_dir / f"{meta['namespace']}-{meta['name']}-{meta['uid'][:8]}"
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)  # any pod uid may write (hostPath ignores fsGroup), as local-path does
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "hostPath": {"path": str(path), "type": "Directory"},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        self.kubectl("apply", "-f", "-", stdin=json.dumps(volume))
        print(f"provisioned {volume['metadata']['name']} at {path}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--dns-dir", type=Path, required=True)
    parser.add_argument("--pv-dir", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=1.0)
    opts = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    agent = Agent(opts.kubectl, opts.kubeconfig, opts.dns_dir, opts.pv_dir)
    while True:
        try:
            agent.storage_class()
            break
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            print(f"storage class: {err}", flush=True)
            time.sleep(opts.interval)
    while True:
        try:
            agent.sync()
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as err:
            print(f"sync: {err}", flush=True)
        time.sleep(opts.interval)


if __name__ == "__main__":
    raise SystemExit(main())
