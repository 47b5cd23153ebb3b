"""The chart's NATS fsyncs before each acknowledgement unless ``nats.syncInterval`` says
otherwise: the rendered nats.conf, the values schema's refusal of a value nats-server would
misread, the NOTES' warning, and a real nats-server started with the rendered configuration
(its ``/varz`` shows the setting it took, and ``wayline doctor`` reads it there)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.nats.test_tls_and_nkeys import pki  # noqa: F401 - the fixture: a CA, 127.0.0.1's cert
from tests.operator.test_chart import _render, _template_error, helm, notes  # noqa: F401
from tests.operator.test_chart_values import WORKERS, _conf, _start_nodes
from wayline.cli import main


def _rendered_conf(helm: Path, *values: str) -> str:  # noqa: F811
    return _conf(_render(helm, "ns1", WORKERS, *values))


def test_the_default_is_always_and_an_override_renders_as_given(helm: Path) -> None:  # noqa: F811
    assert 'sync_interval: "always"' in _rendered_conf(helm)
    assert 'sync_interval: "2m"' in _rendered_conf(helm, "nats.syncInterval=2m")
    assert 'sync_interval: "1h30m"' in _rendered_conf(helm, "nats.syncInterval=1h30m")


def test_the_schema_refuses_what_is_neither_always_nor_a_duration(helm: Path) -> None:  # noqa: F811
    for bad in ("soon", "2", "Always", "2 m", "-1s", ""):
        error = _template_error(helm, "--set", WORKERS, "--set-string", f"nats.syncInterval={bad}")
        # the value is refused, not the key: the schema names the field and its pattern
        assert "/nats/syncInterval" in error and "pattern" in error, (bad, error)


def _varz(node: Any) -> dict[str, Any]:
    """The node's ``/varz``, at the monitoring port its rendered configuration names."""
    [port] = re.findall(r"http: 127\.0\.0\.1:(\d+)", (node.store / "nats.conf").read_text())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=5) as answer:
        varz: dict[str, Any] = json.loads(answer.read())
    varz["monitor"] = f"http://127.0.0.1:{port}"
    return varz


@pytest.mark.parametrize(("value", "always", "interval"), [(None, True, 120), ("10s", None, 10)])
def test_a_nats_server_takes_the_rendered_setting(
    value: str | None,
    always: bool | None,
    interval: int,
    helm: Path,  # noqa: F811
    pki: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # without credentials: the doctor below connects as a bare client
    values = ["nats.auth.generate=false", *([f"nats.syncInterval={value}"] if value else [])]
    docs = _render(helm, "ns1", WORKERS, *values)
    [node] = _start_nodes(docs, pki, tmp_path, {}, monkeypatch)
    try:
        varz = _varz(node)
        config = varz["jetstream"]["config"]
        # a bare 10s in the file would be read as a number: the rendered value is quoted
        assert config.get("sync_always") is always and config["sync_interval"] == interval * 10**9
        code = main(["doctor", "--world", node.url, "--monitor", varz["monitor"]])
        lines = capsys.readouterr().out.splitlines()
        [sync] = [line for line in lines if " sync: " in line]
        assert code == 0 and sync.startswith("ok" if always else "warn"), lines
    finally:
        node.stop()


def test_the_notes_warn_of_a_lazy_interval(helm: Path, control_plane: Any) -> None:  # noqa: F811
    text = notes(helm, control_plane, WORKERS)
    assert "fsync before each acknowledgement (sync_interval always)" in text
    assert "WARNING" not in text
    lazy = notes(helm, control_plane, WORKERS, "nats.syncInterval=2m")
    [warning] = [line for line in lazy.splitlines() if "WARNING" in line]
    assert "nats.syncInterval=2m" in warning and "up to 2m of acknowledged" in warning, warning
