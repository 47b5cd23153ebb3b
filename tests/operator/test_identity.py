"""The operator as the chart's image runs it: a uid with no passwd entry and no ``USER`` /
``LOGNAME`` in the environment (the image runs as 65532; Debian-based images have no entry for
it). kopf's default peering identity calls ``getpass.getuser()``, which raises there, so the
operator crashed at start and no WorkflowRun ever got a status. This runs
``python -m wayline_operator`` as such a uid against the real API server and waits for a status.

The uid comes from a user namespace (``unshare --user --map-user``): inside it the process is
that uid (``os.getuid()``, the passwd lookup) while files are still reached as the caller, so
no root is needed. Where user namespaces are not allowed the test is skipped, or fails when
``CI=true`` / ``WAYLINE_REQUIRE_ALL_COMPONENTS=1``.
"""

from __future__ import annotations

import json
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.operator.conftest import _missing
from tests.operator.test_workflowrun import CRDS, _kubeconfig_env
from tests.servers import dying_with_us

#: The users kopf's getpass.getuser() consults before the passwd database.
_USER_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME", "POD_ID")


def _uid_without_passwd_entry() -> int:
    for uid in range(65532, 66000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no free uid in 65532..65999")


def test_the_operator_starts_as_a_uid_with_no_passwd_entry(
    control_plane: Any, nats_server: Any
) -> None:
    uid = _uid_without_passwd_entry()
    as_uid = ["unshare", "--user", f"--map-user={uid}", f"--map-group={uid}"]
    probe = subprocess.run([*as_uid, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        _missing(f"cannot run as another uid in a user namespace: {probe.stderr.strip()}")
    crds = control_plane.kubectl("apply", "-f", str(CRDS))
    assert crds.returncode == 0, crds.stderr
    for crd in ("crd/workflowruns.wayline.dev", "crd/workflowhooks.wayline.dev"):
        done = control_plane.kubectl("wait", "--for=condition=Established", crd, "--timeout=30s")
        assert done.returncode == 0, done.stderr
    namespace = f"id-{uuid.uuid4().hex[:10]}"
    assert control_plane.kubectl("create", "namespace", namespace).returncode == 0
    home = Path(tempfile.mkdtemp(prefix="wayline-uid-"))
    try:
        kubeconfig = home / "kubeconfig"
        shutil.copyfile(control_plane.kubeconfig, kubeconfig)
        url = f"{nats_server.url}?prefix=id{namespace.replace('-', '')}"
        env = {
            k: v for k, v in _kubeconfig_env(url, kubeconfig).items() if k not in _USER_VARIABLES
        }
        env["HOME"] = str(home)
        log = home / "operator.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                dying_with_us(
                    [*as_uid, sys.executable, "-m", "wayline_operator", "--namespace", namespace]
                ),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=home,
            )
        try:
            manifest = {
                "apiVersion": "wayline.dev/v1alpha1",
                "kind": "WorkflowRun",
                "metadata": {"name": "nobody", "namespace": namespace},
                "spec": {"workflow": "chain", "input": [1]},
            }
            applied = control_plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))
            assert applied.returncode == 0, applied.stderr
            phase = None
            deadline = time.monotonic() + 30
            while phase is None and time.monotonic() < deadline and proc.poll() is None:
                got = control_plane.kubectl("-n", namespace, "get", "wfr", "nobody", "-o", "json")
                phase = json.loads(got.stdout).get("status", {}).get("phase")
                time.sleep(0.3)
            assert proc.poll() is None, f"the operator exited:\n{log.read_text()[-3000:]}"
            assert phase is not None, f"no status after 30 s:\n{log.read_text()[-3000:]}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        shutil.rmtree(home, ignore_errors=True)
