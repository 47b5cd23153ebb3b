"""The chart's console on real pods: installed with ``console.enabled``, its pod passes its
``/healthz`` probes, its HTTP API, reached through its Service from another pod, lists a run a
WorkflowRun started with the chart's generated bearer token, and refuses a request without it
(401) and an action with it (403: read-only by default)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.e2e.conftest import Install, Release

pytestmark = pytest.mark.timeout(900)

CONSOLE = Install(values={"console": {"enabled": True}})

#: Run in a worker pod: an HTTP request to the console's Service, printed as {status, body}.
#: A worker pod, because the console is reached through its Service as any client in the
#: cluster would, and the worker image has Python but no curl.
REQUEST = """
import json, sys, urllib.error, urllib.request
method, url, token = sys.argv[1:4]
request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
if token:
    request.add_header("Authorization", "Bearer " + token)
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        status, body = answer.status, answer.read()
except urllib.error.HTTPError as err:
    status, body = err.code, err.read()
print(json.dumps({"status": status, "body": json.loads(body or b"null")}))
"""


def _call(release: Release, method: str, path: str, token: str = "") -> tuple[int, object]:
    pod = release.wait_ready("worker", 1)[0].metadata.name
    url = f"http://{release.name}-wayline-console.{release.namespace}.svc:8233{path}"
    out = release.exec(pod, "python", "-c", REQUEST, method, url, token)
    answer = json.loads(out)
    return answer["status"], answer["body"]


@pytest.mark.parametrize("release", [CONSOLE], indirect=True)
def test_the_console_lists_a_workflowruns_run_with_the_token_and_refuses_without(
    release: Release,
) -> None:
    (pod,) = release.wait_ready("console", 1)
    for c in pod.status.container_statuses:
        assert c.ready and c.restart_count == 0, c
    secret = release.core.read_namespaced_secret("e2e-wayline-console-token", release.namespace)
    token = base64.b64decode(secret.data["token"]).decode()

    release.run("console-q-1", "quick", "console-q-1")
    status = release.wait_phase(["console-q-1"], ("completed",), timeout=120)["console-q-1"]
    run_id = status["runId"]

    code, body = _call(release, "GET", "/api/runs")
    assert code == 401, body
    assert isinstance(body, dict) and body["error"]["code"] == "UNAUTHORIZED"
    code, body = _call(release, "GET", "/api/runs?status=completed", token)
    assert code == 200, body
    assert isinstance(body, dict)
    listed = {r["runId"]: r for r in body["runs"]}
    assert run_id in listed, body
    assert listed[run_id]["workflow"] == "quick" and body["counts"].get("completed", 0) >= 1
    code, body = _call(release, "GET", "/api/info", token)
    assert code == 200 and isinstance(body, dict) and body["readOnly"] is True, body
    # the world the workers use, without the NATS credentials its URL carries in the pod
    assert body["world"].startswith("nats://e2e-wayline-nats.") and "@" not in body["world"]
    code, body = _call(release, "POST", f"/api/runs/{run_id}/cancel", token)
    assert code == 403, body
